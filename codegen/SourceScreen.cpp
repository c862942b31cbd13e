//===- SourceScreen.cpp - inputs upstream MLIR crashes on -----------------===//

#include "codegen/SourceScreen.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace {
bool isIdentifierChar(char c) {
  return llvm::isAlnum(c) || c == '_' || c == '$' || c == '.' || c == '-';
}
} // namespace

LogicalResult thdc::screenUpstreamCrashes(MLIRContext &context,
                                          const llvm::SourceMgr &sourceMgr) {
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  llvm::StringRef text = buffer->getBuffer();
  bool found = false;
  auto report = [&](size_t offset) {
    found = true;
    auto [line, column] = sourceMgr.getLineAndColumn(
        llvm::SMLoc::getFromPointer(text.data() + offset));
    return emitError(FileLineColLoc::get(&context,
                                         buffer->getBufferIdentifier(), line,
                                         column));
  };
  for (size_t i = 0, n = text.size(); i < n; ++i) {
    char c = text[i];
    if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      i = text.find('\n', i);
      if (i == llvm::StringRef::npos)
        break;
      continue;
    }
    if (c == '"') {
      for (++i; i < n && text[i] != '"' && text[i] != '\n'; ++i)
        if (text[i] == '\\')
          ++i;
      continue;
    }
    if (c == '%') {
      size_t start = i++;
      while (i < n && isIdentifierChar(text[i]))
        ++i;
      if (i + 1 < n && text[i] == '#' && llvm::isDigit(text[i + 1])) {
        uint64_t number = 0;
        size_t digits = i + 1;
        for (; digits < n && llvm::isDigit(text[digits]); ++digits)
          if (number <= kMaxResultNumber)
            number = number * 10 + (text[digits] - '0');
        if (number > kMaxResultNumber)
          report(start) << "result number in '"
                        << text.slice(start, std::min(digits, start + 40))
                        << "' is out of range: thdc accepts result numbers "
                           "up to "
                        << kMaxResultNumber;
      }
      --i;
      continue;
    }
    if (c == 'a' && text.substr(i).starts_with("array") &&
        (i == 0 || !isIdentifierChar(text[i - 1]))) {
      size_t j = i + 5;
      while (j < n && llvm::isSpace(text[j]))
        ++j;
      if (j < n && text[j] == '<') {
        ++j;
        while (j < n && llvm::isSpace(text[j]))
          ++j;
        llvm::StringRef rest = text.substr(j);
        bool index = rest.starts_with("index") &&
                     (rest.size() == 5 || !isIdentifierChar(rest[5]));
        // A type alias may stand for index: not resolved here, refused too.
        bool alias = rest.starts_with("!");
        if (index || alias)
          report(i) << "a dense array of "
                    << (index ? "'index'" : "an aliased type")
                    << " is not supported (MLIR's parser cannot read "
                       "one); use an integer type such as i64";
      }
      i += 4;
    }
  }
  return failure(found);
}
