// A runtime header that includes the compiler (the layering check must fail).
#include "runtime/Status.h"
#include "compiler/Jit.h"
