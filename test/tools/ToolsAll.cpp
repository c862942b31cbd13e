//===- ToolsAll.cpp - the three tools' mains in one binary ----------------===//
//
//   thd-tools-all thdcMain|thdOptMain|thdRunMain ARGS...
//
// Links thdcMain, thdOptMain and thdRunMain into one executable, as the
// Python package's console entry points do, and runs the one named first:
// its options must not clash with the others' (test/tools/tool-mains.test).
//
//===----------------------------------------------------------------------===//

#include "tools/ToolMains.h"

#include <cstdio>
#include <cstring>

int main(int argc, char **argv) {
  struct Tool {
    const char *name;
    int (*main)(int, char **);
  };
  const Tool tools[] = {{"thdcMain", thdc::tools::thdcMain},
                        {"thdOptMain", thdc::tools::thdOptMain},
                        {"thdRunMain", thdc::tools::thdRunMain}};
  if (argc >= 2)
    for (const Tool &tool : tools)
      if (std::strcmp(argv[1], tool.name) == 0) {
        argv[1] = argv[0];
        return tool.main(argc - 1, argv + 1);
      }
  std::fprintf(stderr, "usage: %s thdcMain|thdOptMain|thdRunMain ARGS...\n",
               argv[0]);
  return 2;
}
