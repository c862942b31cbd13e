#include "compiler/Targets.h"
