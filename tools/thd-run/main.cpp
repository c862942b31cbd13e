#include "tools/ToolMains.h"
int main(int argc, char **argv) { return thdc::tools::thdRunMain(argc, argv); }
