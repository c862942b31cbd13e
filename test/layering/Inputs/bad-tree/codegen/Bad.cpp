// The lowering including a tool and the driver above it (the layering check
// must fail); the dialect below it is fine.
#include "dialect/THDOps.h"
#include "tools/ToolMains.h"
