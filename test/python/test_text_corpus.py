"""bench/text_corpus.py, the real text for Megatron-LM's runs: the standard
library's source cut into documents at its top-level definitions (decorators
with their definition), its test folders left out, and, where SentencePiece
and megatron-core are installed, the whole corpus made from a small stand-in
library: every document a line of the jsonl, its ids in Megatron's indexed
format (read back by megatron-core's own reader) ending in the
end-of-document id and decoding to the document exactly."""
import importlib.util
import json
import os

import pytest

from conftest import SOURCE_DIR

SCRIPT = os.path.join(SOURCE_DIR, "bench", "text_corpus.py")
spec = importlib.util.spec_from_file_location("text_corpus", SCRIPT)
text_corpus = importlib.util.module_from_spec(spec)
spec.loader.exec_module(text_corpus)

SOURCE = '''"""A module."""
import os

X = 1


@decorator
@other(1)
def f():
    return X


class C:
    def method(self):
        pass

async def g():
    pass
'''


def test_a_file_is_cut_at_its_top_level_definitions():
    docs = text_corpus.documents(SOURCE)
    assert [d.splitlines()[0] for d in docs] == ['"""A module."""', "@decorator", "class C:",
                                                "async def g():"]
    assert "".join(docs) == SOURCE  # nothing lost
    assert docs[1].splitlines()[:3] == ["@decorator", "@other(1)", "def f():"]
    assert text_corpus.documents("") == [] and text_corpus.documents("\n\n") == []


def test_the_library_walk_leaves_tests_out(tmp_path):
    for path in ("a.py", "pkg/b.py", "pkg/c.txt", "test/test_a.py", "idlelib/x.py",
                 "site-packages/y.py", "pkg/tests/t.py", "z.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x = 1\n")
    files = [os.path.relpath(p, tmp_path) for p in text_corpus.stdlib_files(str(tmp_path))]
    assert files == ["a.py", "pkg/b.py", "z.py"]
    assert len(text_corpus.stdlib_files(str(tmp_path), limit=2)) == 2


def test_the_corpus_end_to_end(tmp_path):
    pytest.importorskip("sentencepiece")
    pytest.importorskip("torch")
    try:
        from megatron.core.datasets.indexed_dataset import IndexedDataset
    except Exception as error:  # megatron-core is not installed here
        pytest.skip(f"megatron-core's indexed dataset does not import ({error})")
    import sentencepiece as spm

    library = tmp_path / "lib"
    library.mkdir()
    for i in range(6):
        (library / f"m{i}.py").write_text(SOURCE.replace("X", f"X{i}") * (i + 1)
                                          + "\n# ünïcödé ✓ tab\there\n")
    out = tmp_path / "out"
    assert text_corpus.main([str(out), "--vocab", "400", "--stdlib", str(library)]) == 0
    docs = [json.loads(line)["text"] for line in (out / "corpus.jsonl").read_text().splitlines()]
    expected = text_corpus.corpus(text_corpus.stdlib_files(str(library)))
    assert docs == expected and len(docs) > 6
    sp = spm.SentencePieceProcessor(model_file=str(out / "tokenizer.model"))
    assert sp.get_piece_size() == 400
    indexed = IndexedDataset(str(out / "tokens"))
    assert len(indexed) == len(docs)
    for doc, item in zip(docs, (indexed[i] for i in range(len(docs)))):
        ids = [int(x) for x in item]
        assert ids[-1] == 400 and max(ids[:-1]) < 400
        assert sp.decode(ids[:-1]) == doc
    meta = json.loads((out / "meta.json").read_text())
    assert meta["documents"] == len(docs) and meta["megatron_vocab_size"] == 401
    assert meta["tokens"] == sum(len(indexed[i]) for i in range(len(docs)))


def test_bad_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit):
        text_corpus.main([str(tmp_path / "o"), "--vocab", "100"])
    assert "--vocab must be at least 300" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        text_corpus.main([str(tmp_path / "o"), "--stdlib", str(tmp_path / "none")])
    assert "no folder" in capsys.readouterr().err
