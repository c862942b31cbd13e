//===- Nesting.h - nest brackets deep in MLIR text --------------*- C++ -*-===//
//
// A structural mutation of the fuzzers that take pipeline text: insert, at
// a random position, a run of one opening spelling (`[`, `(`, `{`,
// `{a = `, `tuple<`, `array<i64: `, `affine_map<(d0) -> (`, an integer set
// whose `>` compares, a negation `-`, an affine `+ d0`) repeated hundreds
// to thousands of times, and half the time its closers after it.
// Byte mutations and dictionary insertions add one bracket at a time and
// never reach the depth at which MLIR's recursive parser runs out of stack
// (about ten thousand levels: 20 KB of text), nor the bound thdc screens
// for (compiler/SourceScreen.h, 128): with this they reach both.
//
//===----------------------------------------------------------------------===//

#ifndef THDC_TEST_FUZZ_NESTING_H
#define THDC_TEST_FUZZ_NESTING_H

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <random>
#include <string>

namespace thdc::fuzz {

/// Inserts a deep run of brackets into `text` (at most `maxSize` bytes
/// after); false, leaving `text` as it was, when there is no room.
template <typename Rng>
bool nestDeeply(std::string &text, size_t maxSize, Rng &rng) {
  // A run: `before`, then `open` repeated, then (half the time) `close`
  // repeated and `after`. The last three nest the parser without brackets
  // that a plain count would see: `>` as a comparison, negations, operator
  // chains.
  struct Spelling {
    const char *before, *open, *close, *after;
  };
  static const Spelling kSpellings[] = {
      {"", "[", "]", ""},
      {"", "(", ")", ""},
      {"", "{", "}", ""},
      {"", "{a = ", "}", ""},
      {"", "tuple<", ">", ""},
      {"", "array<i64: ", ">", ""},
      {"", "affine_map<(d0) -> (", ")>", ""},
      {"", "[affine_set<(d0) : (d0 > = 0)>, ", "]", ""},
      {"affine_map<(d0) -> (", "-", "", "d0)>"},
      {"affine_map<(d0) -> (d0", " + d0", "", ")>"}};
  auto pick = [&](size_t n) {
    return std::uniform_int_distribution<size_t>(0, n - 1)(rng);
  };
  const Spelling &s = kSpellings[pick(std::size(kSpellings))];
  std::string before(s.before), open(s.open), close(s.close), after(s.after);
  bool closed = pick(2) == 0;
  size_t fixed = before.size() + (closed ? after.size() : 0);
  size_t unit = open.size() + (closed ? close.size() : 0);
  if (text.size() + fixed + unit > maxSize)
    return false;
  // 100 to 12,000 levels, within the room left.
  size_t levels = std::min<size_t>(100 + pick(11900),
                                   (maxSize - text.size() - fixed) / unit);
  std::string run = before;
  run.reserve(fixed + levels * unit);
  for (size_t i = 0; i < levels; ++i)
    run += open;
  if (closed) {
    for (size_t i = 0; i < levels; ++i)
      run += close;
    run += after;
  }
  text.insert(pick(text.size() + 1), run);
  return true;
}

} // namespace thdc::fuzz

#endif // THDC_TEST_FUZZ_NESTING_H
