#!/usr/bin/env python3
"""Seed corpus and dictionary of the pipeline fuzzer, made from the sources.

  gen-pipeline-inputs.py seeds OUT_DIR ROOT FILE...
      One seed per pipeline: every FILE (a path under ROOT) split at
      `// -----` lines (the -split-input-file separator), with the
      whole-line comments (RUN, CHECK, expected-error, prose) dropped. Empty
      and repeated chunks are left out. OUT_DIR is emptied first, so a seed
      whose source went away does not linger.

  gen-pipeline-inputs.py dict OUT_FILE BASE_DICT TD_FILE...
      A libFuzzer dictionary: the entries of BASE_DICT (the hand-written
      MLIR syntax around the dialect), then every op name (`thd.<mnemonic>`),
      every keyword of the ops' assembly formats, every enum case, every
      attribute mnemonic (`#thd.<name><`) and every `thd.*` attribute name found in the TD_FILEs. Fails when an op
      definition yields no mnemonic, so that a change of the ODS layout
      cannot silently drop ops from the dictionary.

Made at build time (test/fuzz/CMakeLists.txt) so that the corpus follows
the examples and tests instead of copies of them.
"""

import hashlib
import os
import re
import sys

SPLIT = re.compile(r"^\s*//\s*-----\s*$")
COMMENT = re.compile(r"^\s*//")


def split_chunks(text):
    chunk = []
    for line in text.splitlines():
        if SPLIT.match(line):
            yield chunk
            chunk = []
        elif not COMMENT.match(line):
            chunk.append(line.rstrip())
    yield chunk


def make_seeds(out_dir, root, files):
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(out_dir):
        os.remove(os.path.join(out_dir, name))
    seen = set()
    count = 0
    for path in sorted(files):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            chunks = list(split_chunks(f.read()))
        for index, lines in enumerate(chunks):
            # Blank lines at either end carry nothing.
            while lines and not lines[0].strip():
                lines.pop(0)
            while lines and not lines[-1].strip():
                lines.pop()
            if not lines:
                continue
            body = "\n".join(lines) + "\n"
            digest = hashlib.sha1(body.encode()).hexdigest()
            if digest in seen:
                continue
            seen.add(digest)
            stem = re.sub(r"[^A-Za-z0-9_.-]", "_", rel)
            suffix = f"-{index}" if len(chunks) > 1 else ""
            with open(os.path.join(out_dir, f"{stem}{suffix}"), "w",
                      encoding="utf-8") as f:
                f.write(body)
            count += 1
    if count == 0:
        sys.exit("gen-pipeline-inputs.py: no seed made from %d files" % len(files))


def quote(token):
    out = []
    for ch in token:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append("\\x%02X" % ord(ch))
    return '"' + "".join(out) + '"'


OP_DEF = re.compile(r"^def\s+(\w+)\s*:\s*(?:THD_Op\s*<|Op\s*<\s*THD_Dialect\s*,)",
                    re.M)
MNEMONIC = re.compile(r'^def\s+\w+\s*:\s*(?:THD_Op\s*<\s*|Op\s*<\s*THD_Dialect\s*,\s*)"([\w.]+)"',
                      re.M)
FORMAT = re.compile(r"assemblyFormat\s*=\s*(?:\[\{(.*?)\}\]|\"((?:[^\"\\]|\\.)*)\")", re.S)
KEYWORD = re.compile(r"`([^`]*)`")
ENUM_CASE = re.compile(r'EnumAttrCase\s*<\s*"(\w+)"')
ATTR_NAME = re.compile(r'AttrName\s*=\s*"(thd\.[\w.]+)"')
ATTR_MNEMONIC = re.compile(
    r'(?:THD_Attr\s*<\s*"\w+"|EnumAttr\s*<\s*THD_Dialect\s*,\s*\w+)\s*,\s*"(\w+)"')


def make_dict(out_file, base_dict, td_files):
    entries = []
    with open(base_dict, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                entries.append(line)
    tokens = []
    for path in td_files:
        with open(path, encoding="utf-8") as f:
            td = f.read()
        defs = OP_DEF.findall(td)
        names = MNEMONIC.findall(td)
        if len(names) != len(defs):
            sys.exit(f"gen-pipeline-inputs.py: {path}: {len(defs)} op definitions "
                     f"but {len(names)} mnemonics found; update the patterns")
        tokens += ["thd." + name for name in names]
        for match in FORMAT.finditer(td):
            body = match.group(1) if match.group(1) is not None else match.group(2)
            tokens += [k for k in KEYWORD.findall(body) if k]
        tokens += ENUM_CASE.findall(td)
        tokens += ATTR_NAME.findall(td)
        tokens += ["#thd." + name + "<" for name in ATTR_MNEMONIC.findall(td)]
    seen = set()
    lines = []
    for entry in entries:
        if entry not in seen:
            seen.add(entry)
            lines.append(entry)
    for token in tokens:
        entry = quote(token)
        if entry not in seen:
            seen.add(entry)
            lines.append(entry)
    os.makedirs(os.path.dirname(os.path.abspath(out_file)), exist_ok=True)
    with open(out_file, "w", encoding="utf-8") as f:
        f.write("# Generated by test/fuzz/gen-pipeline-inputs.py; do not edit.\n")
        f.write("\n".join(lines) + "\n")


def main(argv):
    if len(argv) >= 4 and argv[1] == "seeds":
        make_seeds(argv[2], argv[3], argv[4:])
    elif len(argv) >= 5 and argv[1] == "dict":
        make_dict(argv[2], argv[3], argv[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
