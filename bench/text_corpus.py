#!/usr/bin/env python3
"""Real text for Megatron-LM's pretrain_gpt.py, made where there is no
network: the Python standard library's own source (its code, comments and
docstrings, which every Python install ships), cut into documents at its
top-level definitions, a byte-level BPE tokenizer trained on it here
(SentencePiece), and the token ids in Megatron's own indexed format.

    python3 bench/text_corpus.py OUT [--vocab 32767] [--stdlib DIR] [--limit-files K]

writes OUT/
  corpus.jsonl        {"text": ...} per document: --use-varlen-dataset --data-path
                      OUT/corpus.jsonl --tokenizer-type SentencePieceTokenizer
                      --tokenizer-model OUT/tokenizer.model (needs the `datasets`
                      and `sentencepiece` packages where it trains)
  tokenizer.model     the SentencePiece model (BPE, byte fallback: every text encodes)
  tokens.bin, .idx    each document's ids and an end-of-document id (= --vocab),
                      written by megatron-core's IndexedDatasetBuilder: real tokens
                      for Megatron's variable-length mock data, which then needs no
                      tokenizer where it trains:
                      --use-varlen-dataset --mock-data --tokenizer-type NullTokenizer
                      --vocab-size VOCAB+1 --varlen-mock-dataset-config-json
                      '{"mode": "verification", "data_path": "OUT/tokens", ...}'
                      (megatron/training/datasets/sft_dataset.py:225-321 on dev
                      d48bd6be0a: the documents' tokens, cut to lognormal lengths)
  meta.json           the source (Python version, files), the tokenizer, the
                      documents' lengths in tokens (quantiles)

The corpus is deterministic for a given Python version: the files sorted by
path, the tokenizer trained single-threaded with a fixed seed."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import sysconfig
import tempfile
from typing import Iterable, List

# Folders of the standard library left out: its tests (a third of it, much
# of it data), IDLE, and what is installed into it.
SKIP = ("test", "tests", "idlelib", "site-packages", "dist-packages", "__pycache__",
        "lib2to3", "turtledemo")

# A top-level definition starts a new document: its decorators with it.
_TOP = re.compile(r"^(?:@|def |async def |class )")


def stdlib_files(root: str, limit: int = 0) -> List[str]:
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP and not d.startswith("."))
        files.extend(os.path.join(folder, n) for n in sorted(names) if n.endswith(".py"))
    files.sort(key=lambda p: os.path.relpath(p, root))
    return files[:limit] if limit else files


def documents(text: str) -> List[str]:
    """A file cut before each top-level definition (decorators included):
    the module's head, then one document per definition."""
    out: List[str] = []
    current: List[str] = []
    decorated = False
    for line in text.splitlines(keepends=True):
        starts = _TOP.match(line) is not None
        if starts and current and not decorated:
            out.append("".join(current))
            current = []
        decorated = line.startswith("@") or (decorated and not starts)
        current.append(line)
    if current:
        out.append("".join(current))
    return [d for d in out if d.strip()]


def corpus(files: Iterable[str]) -> List[str]:
    docs: List[str] = []
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            docs.extend(documents(f.read()))
    return docs


def train_tokenizer(docs: List[str], prefix: str, vocab: int) -> None:
    import sentencepiece as spm

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        for doc in docs:
            for line in doc.splitlines():
                if line.strip():
                    f.write(line + "\n")
        text = f.name
    try:
        # Every line, in order, one thread: the same model from the same files.
        spm.SentencePieceTrainer.train(
            input=text, model_prefix=prefix, vocab_size=vocab, model_type="bpe",
            byte_fallback=True, character_coverage=1.0, normalization_rule_name="identity",
            remove_extra_whitespaces=False, allow_whitespace_only_pieces=True,
            split_digits=True, max_sentence_length=16384, num_threads=1,
            input_sentence_size=0, shuffle_input_sentence=False, add_dummy_prefix=False,
            minloglevel=2)
    finally:
        os.unlink(text)


def write_indexed(ids: List[List[int]], prefix: str, eod: int) -> None:
    """megatron-core's own IndexedDatasetBuilder: one item per document,
    its ids then the end-of-document id."""
    import numpy as np
    import torch
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    dtype = np.uint16 if eod < 65500 else np.int32
    builder = IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
    for doc in ids:
        builder.add_item(torch.tensor(doc + [eod], dtype=torch.int64))
        builder.end_document()
    builder.finalize(prefix + ".idx")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--vocab", type=int, default=32767,
                        help="the tokenizer's pieces; the end-of-document id is this")
    parser.add_argument("--stdlib", default=sysconfig.get_paths()["stdlib"],
                        help="the standard library's folder (default this Python's)")
    parser.add_argument("--limit-files", type=int, default=0, help="the first K files only")
    args = parser.parse_args(argv)
    if args.vocab < 300:
        parser.error("--vocab must be at least 300 (256 byte pieces and some merges)")
    if not os.path.isdir(args.stdlib):
        parser.error(f"no folder {args.stdlib}")
    os.makedirs(args.out, exist_ok=True)
    files = stdlib_files(args.stdlib, args.limit_files)
    docs = corpus(files)
    if not docs:
        parser.error(f"no Python source under {args.stdlib}")
    with open(os.path.join(args.out, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for doc in docs:
            f.write(json.dumps({"text": doc}) + "\n")
    prefix = os.path.join(args.out, "tokenizer")
    train_tokenizer(docs, prefix, args.vocab)
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    ids = [list(sp.encode(doc)) for doc in docs]
    write_indexed(ids, os.path.join(args.out, "tokens"), eod=args.vocab)
    lengths = sorted(len(doc) + 1 for doc in ids)
    quantile = lambda q: lengths[min(len(lengths) - 1, int(q * len(lengths)))]
    meta = {"source": f"Python {sys.version.split()[0]} standard library ({args.stdlib}), "
                      f"{len(files)} files, folders {', '.join(SKIP)} left out",
            "documents": len(docs), "tokens": sum(lengths), "vocab": args.vocab,
            "eod": args.vocab, "megatron_vocab_size": args.vocab + 1,
            "tokens_per_document": {q: quantile(float(q)) for q in
                                    ("0.1", "0.25", "0.5", "0.75", "0.9", "0.99")},
            "longest": lengths[-1]}
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
