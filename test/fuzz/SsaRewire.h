//===- SsaRewire.h - rewire one SSA use in MLIR text ------------*- C++ -*-===//
//
// The pipeline fuzzer's structural mutation, on text: find the `%name`
// definitions (op results before `=`, block and function arguments before
// `:`) and the uses, and make one use name another definition: the op's
// own result, a value defined later, or any value. Byte mutations almost
// never do that (they would have to spell an existing name at a use), so
// without it the fuzzer does not reach graphs with SSA cycles, which the
// parser accepts and only the dominance check, after every op's verifier,
// rejects.
//
// The text need not parse: the scan is lexical, and a misread definition
// only makes a less useful mutation.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_TEST_FUZZ_SSAREWIRE_H
#define THDC_TEST_FUZZ_SSAREWIRE_H

#include <cstddef>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace thdc::fuzz {

/// One `%name` in the text (without any `#N` result index after it).
struct ValueRef {
  size_t begin = 0, end = 0;
  bool definition = false;
  /// The first and last byte of the line it is on.
  size_t lineBegin = 0, lineEnd = 0;
  std::string_view name(std::string_view text) const {
    return text.substr(begin, end - begin);
  }
};

inline bool isValueIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '.' || c == '-';
}

inline bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/// Every `%name` of the text, definitions marked.
inline std::vector<ValueRef> scanValueRefs(std::string_view text) {
  std::vector<ValueRef> refs;
  size_t lineBegin = 0;
  while (lineBegin <= text.size()) {
    size_t lineEnd = text.find('\n', lineBegin);
    if (lineEnd == std::string_view::npos)
      lineEnd = text.size();
    std::string_view line = text.substr(lineBegin, lineEnd - lineBegin);
    size_t first = refs.size();
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '/' && i + 1 < line.size() && line[i + 1] == '/')
        break; // a comment
      if (line[i] != '%')
        continue;
      size_t end = i + 1;
      while (end < line.size() && isValueIdChar(line[end]))
        ++end;
      if (end == i + 1)
        continue;
      ValueRef ref;
      ref.begin = lineBegin + i;
      ref.end = lineBegin + end;
      ref.lineBegin = lineBegin;
      ref.lineEnd = lineEnd;
      // An argument: `%name:` followed by a type, not by a result count.
      if (end < line.size() && line[end] == ':' &&
          !(end + 1 < line.size() && line[end + 1] >= '0' &&
            line[end + 1] <= '9'))
        ref.definition = true;
      refs.push_back(ref);
      i = end - 1;
    }
    // Op results: the line starts with `%a, %b:2 =`.
    size_t pos = 0;
    auto skipSpaces = [&] {
      while (pos < line.size() && isSpace(line[pos]))
        ++pos;
    };
    size_t results = first;
    skipSpaces();
    while (results < refs.size() && refs[results].begin == lineBegin + pos) {
      pos = refs[results].end - lineBegin;
      if (pos < line.size() && line[pos] == ':') {
        ++pos;
        while (pos < line.size() && line[pos] >= '0' && line[pos] <= '9')
          ++pos;
      }
      ++results;
      skipSpaces();
      if (pos < line.size() && line[pos] == ',') {
        ++pos;
        skipSpaces();
        continue;
      }
      break;
    }
    if (results > first && pos < line.size() && line[pos] == '=' &&
        !(pos + 1 < line.size() && line[pos + 1] == '='))
      for (size_t r = first; r < results; ++r)
        refs[r].definition = true;
    lineBegin = lineEnd + 1;
  }
  return refs;
}

/// Makes one use of `text` name another defined value; false (text
/// unchanged) when there is no use or no other name to give it, or when the
/// result would be longer than maxSize.
template <typename Rng>
bool rewireSsaUse(std::string &text, size_t maxSize, Rng &rng) {
  std::vector<ValueRef> refs = scanValueRefs(text);
  std::vector<size_t> uses, defs;
  for (size_t i = 0; i < refs.size(); ++i)
    (refs[i].definition ? defs : uses).push_back(i);
  if (uses.empty() || defs.empty())
    return false;
  auto pick = [&](size_t n) {
    return std::uniform_int_distribution<size_t>(0, n - 1)(rng);
  };
  const ValueRef &use = refs[uses[pick(uses.size())]];
  std::string_view current = use.name(text);
  // Candidates, by the kind of rewiring chosen: the results defined on the
  // use's line (the op's own), values defined after it, or any value.
  std::vector<size_t> own, later, any;
  for (size_t d : defs) {
    const ValueRef &def = refs[d];
    if (def.name(text) == current)
      continue;
    any.push_back(d);
    if (def.lineBegin == use.lineBegin && def.begin < use.begin)
      own.push_back(d);
    if (def.begin > use.begin)
      later.push_back(d);
  }
  const std::vector<size_t> *choice = &any;
  switch (pick(3)) {
  case 0:
    if (!own.empty())
      choice = &own;
    break;
  case 1:
    if (!later.empty())
      choice = &later;
    break;
  default:
    break;
  }
  if (choice->empty())
    return false;
  std::string name(refs[(*choice)[pick(choice->size())]].name(text));
  if (text.size() - current.size() + name.size() > maxSize)
    return false;
  text.replace(use.begin, use.end - use.begin, name);
  return true;
}

} // namespace thdc::fuzz

#endif // THDC_TEST_FUZZ_SSAREWIRE_H
