"""The commands the documentation gives a user to copy: every fenced block
marked runnable (a line `<!-- runnable -->` right before it) in README.md
and docs/*.md runs, in order, one folder per document, and must succeed:
`sh` blocks through bash with -euo pipefail, `python` blocks through this
interpreter. The folder holds links to the checkout's examples/ and test/,
so that a block may name their files as a user in the checkout would.
The commands come from PATH: an installed package's entry points, or the
build tree's (THDC_BIN_DIR, put first); `python` is this interpreter.
A document whose blocks need PyTorch skips them where it is missing
(THDC_DOCS_REQUIRE_TORCH=1 makes that a failure: the environment was meant
to have it); a block that fails names its document and line, with its
output. Every other sh, bash or python block says why it does not run,
in a line `<!-- not runnable: REASON -->` right before it, so that a new
block is either run or explained."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR, build_bin_dir

FENCE = re.compile(r"^```(\w+)\s*$")
MARKER = "<!-- runnable -->"
NOT_RUNNABLE = re.compile(r"^<!-- not runnable: \S.*\S -->$")
CHECKED = ("sh", "bash", "python")
NEEDS_TORCH = re.compile(r"^(?:import|from) .*\b(?:torch|megatron)\b", re.M)


def runnable_blocks(path):
    """(line, language, text) of every block marked runnable in `path`."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if not fence:
            raise AssertionError(f"{path}:{i + 1}: {MARKER} must be right before a ``` fence")
        end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
        blocks.append((i + 3, fence.group(1), "\n".join(lines[i + 2:end]) + "\n"))
    return blocks


def unmarked_blocks(path):
    """The lines of the sh, bash and python fences in `path` with neither
    mark right before them."""
    lines = open(path, encoding="utf-8").read().split("\n")
    unmarked, inside = [], False
    for i, line in enumerate(lines):
        if not line.startswith("```"):
            continue
        if inside:
            inside = False
            continue
        inside = True
        fence = FENCE.match(line)
        if not fence or fence.group(1) not in CHECKED:
            continue
        before = lines[i - 1].strip() if i > 0 else ""
        if before != MARKER and not NOT_RUNNABLE.match(before):
            unmarked.append(i + 1)
    return unmarked


def all_documents():
    docs = os.path.join(SOURCE_DIR, "docs")
    return [os.path.join(SOURCE_DIR, "README.md")] + sorted(
        os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md"))


def documents():
    return [p for p in all_documents() if runnable_blocks(p)]


def test_the_marker_finds_the_getting_started_blocks():
    """The getting-started path has its four runnable blocks (a marker lost
    in an edit would make the test below vacuous)."""
    blocks = runnable_blocks(os.path.join(SOURCE_DIR, "docs", "getting-started.md"))
    assert [language for _, language, _ in blocks] == ["sh", "sh", "python", "python"]
    with pytest.raises(AssertionError, match="right before a ``` fence"):
        bad = os.path.join(os.path.dirname(__file__), "data", "unfenced-marker.md")
        runnable_blocks(bad)


def test_every_block_runs_or_says_why_not():
    """Every sh, bash and python block of README.md and docs/*.md is marked
    runnable or `<!-- not runnable: REASON -->`, so a block added without
    either (one that rots unseen) fails here; a reason must be given."""
    unmarked = [f"{os.path.relpath(path, SOURCE_DIR)}:{line}"
                for path in all_documents() for line in unmarked_blocks(path)]
    assert not unmarked, (
        "these blocks are neither marked runnable nor say why they cannot run (a line "
        f"{MARKER} or <!-- not runnable: REASON --> right before the fence): "
        + ", ".join(unmarked))
    bad = os.path.join(os.path.dirname(__file__), "data", "unmarked-blocks.md")
    assert unmarked_blocks(bad) == [4, 12, 21]


@pytest.mark.parametrize("path", documents(), ids=lambda p: os.path.relpath(p, SOURCE_DIR))
def test_runnable_blocks_run(path, tmp_path):
    for name in ("examples", "test"):
        os.symlink(os.path.join(SOURCE_DIR, name), tmp_path / name)
    shims = tmp_path / ".bin"
    shims.mkdir()
    os.symlink(sys.executable, shims / "python")
    bin_dir = build_bin_dir()
    first = [str(shims)] + ([bin_dir] if os.path.exists(os.path.join(bin_dir, "thdc")) else [])
    env = dict(os.environ, PATH=os.pathsep.join(first + [os.environ.get("PATH", "")]),
               PYTHONPATH=os.pathsep.join(sys.path), THDC_CACHE_DIR=str(tmp_path / ".cache"))
    if not shutil.which("thdc", path=env["PATH"]):
        pytest.skip("no thdc command: neither built nor installed with the package")
    for line, language, text in runnable_blocks(path):
        where = f"{os.path.relpath(path, SOURCE_DIR)}:{line}"
        if language == "python":
            if NEEDS_TORCH.search(text) and importlib.util.find_spec("torch") is None:
                if os.environ.get("THDC_DOCS_REQUIRE_TORCH") == "1":
                    pytest.fail(f"{where}: the block needs PyTorch, which is not installed "
                                "(THDC_DOCS_REQUIRE_TORCH=1: it must run here, not skip)")
                pytest.skip(f"{where} and the blocks after it: they need PyTorch")
            command = [sys.executable, "-c", text]
        elif language in ("sh", "bash"):
            command = ["bash", "-euo", "pipefail", "-c", text]
        else:
            raise AssertionError(f"{where}: a runnable block must be sh or python, not "
                                 f"{language}")
        result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=600)
        assert result.returncode == 0, (
            f"{where}: the block failed (exit status {result.returncode})\n{text}\n"
            f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}")


def test_the_readme_starts_with_pip():
    """The README's first section and first command install with pip; the
    source build and its two commands come after."""
    with open(os.path.join(SOURCE_DIR, "README.md")) as f:
        text = f.read()
    sections = re.findall(r"^## (.+)$", text, flags=re.M)
    assert sections[0] == "Installing with pip", sections[:3]
    first_block = re.search(r"```sh\n(.*?)```", text, flags=re.S).group(1)
    assert first_block.lstrip().startswith("pip install ."), first_block
    assert text.index("./scripts/run-example.sh") > text.index("## Installing with pip")
