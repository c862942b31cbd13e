#include "compiler/Pipelines.h"
