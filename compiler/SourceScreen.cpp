//===- SourceScreen.cpp - inputs upstream MLIR crashes on -----------------===//

#include "compiler/SourceScreen.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <vector>

using namespace mlir;

namespace {
/// A character of MLIR's bare identifiers (keywords, type names, alias
/// names): a `-` ends them (`index-` is the keyword `index`).
bool isBareIdChar(char c) {
  return llvm::isAlnum(c) || c == '_' || c == '$' || c == '.';
}

/// A character of an SSA name's suffix (`%a-b.c`).
bool isSuffixIdChar(char c) { return isBareIdChar(c) || c == '-'; }

/// The MLIR lexer skips spaces and `//` comments between any two tokens:
/// the position of the next token at or after `i`.
size_t skipTrivia(llvm::StringRef text, size_t i) {
  while (i < text.size()) {
    if (llvm::isSpace(text[i])) {
      ++i;
    } else if (text.substr(i).starts_with("//")) {
      i = text.find('\n', i);
      if (i == llvm::StringRef::npos)
        return text.size();
    } else {
      break;
    }
  }
  return i;
}

/// The identifier (or `!alias`) starting at `i`.
llvm::StringRef wordAt(llvm::StringRef text, size_t i) {
  size_t end = i < text.size() && text[i] == '!' ? i + 1 : i;
  while (end < text.size() && isBareIdChar(text[end]))
    ++end;
  return text.slice(i, end);
}

/// Calls `visit(i)` at every position of `text` outside comments and string
/// literals.
template <typename Visit> void forEachCodeChar(llvm::StringRef text, Visit visit) {
  for (size_t i = 0, n = text.size(); i < n; ++i) {
    if (text[i] == '/' && i + 1 < n && text[i + 1] == '/') {
      i = text.find('\n', i);
      if (i == llvm::StringRef::npos)
        return;
      continue;
    }
    if (text[i] == '"') {
      for (++i; i < n && text[i] != '"' && text[i] != '\n'; ++i)
        if (text[i] == '\\')
          ++i;
      continue;
    }
    i = visit(i);
  }
}

/// Type aliases (`!name = type`) by name: the first word of their type.
llvm::StringMap<llvm::StringRef> typeAliases(llvm::StringRef text) {
  llvm::StringMap<llvm::StringRef> aliases;
  forEachCodeChar(text, [&](size_t i) {
    if (text[i] != '!' || (i > 0 && isBareIdChar(text[i - 1])))
      return i;
    llvm::StringRef name = wordAt(text, i);
    size_t next = skipTrivia(text, i + name.size());
    if (name.size() > 1 && next < text.size() && text[next] == '=')
      aliases[name] = wordAt(text, skipTrivia(text, next + 1));
    return i + name.size() - 1;
  });
  return aliases;
}

/// Whether the type named `word` is `index`, through aliases (an alias that
/// is not defined is the parser's error, not a crash).
bool isIndexType(llvm::StringRef word,
                 const llvm::StringMap<llvm::StringRef> &aliases) {
  for (int hops = 0; hops < 64 && word.starts_with("!"); ++hops) {
    auto alias = aliases.find(word);
    if (alias == aliases.end())
      return false;
    word = alias->second;
  }
  return word == "index" || word.starts_with("!");
}
} // namespace

LogicalResult thdc::screenUpstreamCrashes(MLIRContext &context,
                                          const llvm::SourceMgr &sourceMgr) {
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  llvm::StringRef text = buffer->getBuffer();
  // MLIR bytecode is not text: the lexical screen does not apply to it.
  if (text.starts_with("ML\xEFR"))
    return success();
  llvm::StringMap<llvm::StringRef> aliases = typeAliases(text);
  bool found = false;
  auto report = [&](size_t offset) {
    found = true;
    auto [line, column] = sourceMgr.getLineAndColumn(
        llvm::SMLoc::getFromPointer(text.data() + offset));
    return emitError(FileLineColLoc::get(&context,
                                         buffer->getBufferIdentifier(), line,
                                         column));
  };
  // The parser's recursion, followed with a stack of the brackets open. A
  // closer pops back to the opener of its kind, dropping what it encloses
  // (a `<` that was a comparison, as in `(d0 <= 0)`); `>` closes only a `<`
  // on top of the stack: inside parentheses it is a comparison
  // (`d0 > = 0` included), and `->` and `>=` close nothing. Affine
  // expressions recurse once per operator too (`- - - d0`, `d0 + d0 + ...`
  // through the parser's helpers), so their operators are bounded as well,
  // and so is any run of `-`.
  std::vector<char> open;
  size_t affineOpen = 0, affineOperators = 0, minusRun = 0;
  llvm::StringRef previousWord;
  bool tooDeep = false, tooLong = false, tooManyMinus = false;
  auto nextIs = [&](size_t i, char c) {
    size_t next = skipTrivia(text, i + 1);
    return next < text.size() && text[next] == c;
  };
  forEachCodeChar(text, [&](size_t i) -> size_t {
    size_t n = text.size();
    char c = text[i];
    llvm::StringRef word = isBareIdChar(c) && (i == 0 || !isBareIdChar(text[i - 1]))
                               ? wordAt(text, i)
                               : llvm::StringRef();
    bool arrowHead = c == '-' && i + 1 < n && text[i + 1] == '>';
    bool operatorWord = word == "mod" || word == "floordiv" || word == "ceildiv";
    if (affineOpen &&
        ((c == '-' && !arrowHead) || c == '+' || c == '*' || operatorWord) &&
        ++affineOperators > kMaxAffineOperators && !tooLong) {
      tooLong = true;
      report(i) << "an affine expression of more than " << kMaxAffineOperators
                << " operators: thdc accepts up to " << kMaxAffineOperators
                << " (MLIR's parser recurses once per operator)";
    }
    if (c == '-' && !arrowHead) {
      if (++minusRun > kMaxNestingDepth && !tooManyMinus) {
        tooManyMinus = true;
        report(i) << "more than " << kMaxNestingDepth
                  << " '-' in a row: MLIR's parser recurses once per '-'";
      }
    } else if (!llvm::isSpace(c)) {
      minusRun = 0;
    }
    bool opener = c == '(' || c == '[' || c == '{' ||
                  (c == '<' && !nextIs(i, '='));
    // Past the bound the input is refused already: the stack stops growing
    // (so that each closer's search stays short).
    if (opener && !tooDeep) {
      bool affine = c == '<' && (previousWord == "affine_map" ||
                                 previousWord == "affine_set");
      open.push_back(affine ? 'A' : c);
      if (affine) {
        if (affineOpen++ == 0)
          affineOperators = 0;
      }
      if (open.size() > kMaxNestingDepth && !tooDeep) {
        tooDeep = true;
        report(i) << "brackets nested more than " << kMaxNestingDepth
                  << " deep: thdc accepts pipelines nested up to "
                  << kMaxNestingDepth
                  << " (MLIR's parser would run out of stack)";
      }
    }
    auto pop = [&] {
      affineOpen -= open.back() == 'A';
      open.pop_back();
    };
    if (c == ')' || c == ']' || c == '}') {
      char kind = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (std::find(open.begin(), open.end(), kind) != open.end()) {
        while (open.back() != kind)
          pop();
        pop();
      }
    } else if (c == '>' && (i == 0 || text[i - 1] != '-') && !nextIs(i, '=') &&
               !open.empty() && (open.back() == '<' || open.back() == 'A')) {
      pop();
    }
    if (!word.empty())
      previousWord = word;
    else if (!llvm::isSpace(c) && !isBareIdChar(c))
      previousWord = llvm::StringRef();
    if (text[i] == '%') {
      size_t end = i + 1;
      while (end < n && isSuffixIdChar(text[end]))
        ++end;
      size_t hash = skipTrivia(text, end);
      if (hash + 1 < n && text[hash] == '#' && llvm::isDigit(text[hash + 1])) {
        uint64_t number = 0;
        size_t digits = hash + 1;
        for (; digits < n && llvm::isDigit(text[digits]); ++digits)
          if (number <= kMaxResultNumber)
            number = number * 10 + (text[digits] - '0');
        if (number > kMaxResultNumber)
          report(i) << "result number '"
                    << text.slice(hash, std::min(digits, hash + 24))
                    << "' of '" << text.slice(i, end)
                    << "' is out of range: thdc accepts result numbers up "
                       "to "
                    << kMaxResultNumber;
      }
      return end - 1;
    }
    if (text[i] == 'a' && text.substr(i).starts_with("array") &&
        (i == 0 || !isBareIdChar(text[i - 1])) &&
        (i + 5 == n || !isBareIdChar(text[i + 5]))) {
      size_t open = skipTrivia(text, i + 5);
      if (open < n && text[open] == '<') {
        llvm::StringRef element = wordAt(text, skipTrivia(text, open + 1));
        if (isIndexType(element, aliases))
          report(i) << "a dense array of 'index'"
                    << (element.starts_with("!")
                            ? " (through the alias '" + element.str() + "')"
                            : std::string())
                    << " is not supported (MLIR's parser cannot read one); "
                       "use an integer type such as i64";
      }
      return i + 4;
    }
    return i;
  });
  return failure(found);
}
