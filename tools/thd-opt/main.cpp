#include "tools/ToolMains.h"
int main(int argc, char **argv) { return thdc::tools::thdOptMain(argc, argv); }
