//===- Bundle.cpp - write a compiled pipeline for the runtime -------------===//

#include "codegen/Bundle.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

#ifndef THDC_VERSION
#define THDC_VERSION "unknown"
#endif

std::string thdc::renderManifest(const BundleContents &contents) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream json(os, /*IndentSize=*/2);
  json.object([&] {
    json.attribute("format", kBundleFormatVersion);
    json.attribute("thdc_version", THDC_VERSION);
    json.attribute("entry", contents.signature.entry);
    json.attributeObject("params", [&] {
      // Sorted, so that equal pipelines give equal manifests.
      std::map<std::string, int64_t> sorted;
      for (const auto &param : contents.signature.params)
        sorted[param.getKey().str()] = param.getValue();
      for (const auto &[name, value] : sorted)
        json.attribute(name, value);
    });
    json.attributeArray("buffers", [&] {
      for (const BufferInfo &buffer : contents.signature.buffers)
        json.object([&] {
          json.attribute("name", buffer.name);
          json.attribute("direction", buffer.isOutput ? "output" : "input");
          json.attribute("type", buffer.elementType);
          json.attribute("elements", buffer.elements);
        });
    });
    json.attributeObject("kernel", [&] {
      json.attribute("name", contents.signature.entry);
      json.attribute("ptx", contents.ptxFile);
      json.attribute("chip", contents.chip);
      json.attributeArray("grid", [&] {
        for (int64_t d : contents.grid)
          json.value(d);
      });
      json.attributeArray("block", [&] {
        for (int64_t d : contents.block)
          json.value(d);
      });
    });
    if (!contents.hostFile.empty())
      json.attributeObject("host", [&] {
        json.attribute("library", contents.hostFile);
        json.attribute("symbol",
                       contents.signature.entry + kPackedSuffix.str());
      });
  });
  os << "\n";
  return text;
}
