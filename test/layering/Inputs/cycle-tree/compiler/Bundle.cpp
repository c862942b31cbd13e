#include "compiler/Pipelines.h"
#include "compiler/Chips.h"
