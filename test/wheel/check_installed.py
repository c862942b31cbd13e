#!/usr/bin/env python3
"""Checks an installed thdc the way a user meets it after `pip install`:
run by scripts/test-wheel.sh with the virtual environment's interpreter, from
outside the source tree, with no PYTHONPATH and no build tree.

    check_installed.py SOURCE_ROOT

Fails (exit status 1, naming the check) when the package is not the
installed one, has no JIT, needs a shared LLVM or MLIR, when the quickstart's
CPU path, a JIT compile or one of the commands thdc, thd-opt and thd-run
fails, or when a result differs from the reference semantics.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import jit_check


def fail(what: str) -> None:
    raise SystemExit(f"check_installed: {what}")


def run(*command, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        fail(f"{' '.join(map(str, command))} exited with {result.returncode}:\n"
             f"{result.stdout}{result.stderr}")
    return result


def main() -> None:
    root = os.path.abspath(sys.argv[1])
    if os.environ.get("PYTHONPATH"):
        fail("PYTHONPATH is set; the installed package must be found on its own")
    import thdc

    location = os.path.dirname(os.path.abspath(thdc.__file__))
    if location.startswith(root + os.sep):
        fail(f"thdc was imported from the source tree ({location}), not installed")
    print(f"thdc from {location}")
    if not thdc.has_jit:
        fail("the installed package has no JIT")

    # One stable-ABI module, in a wheel tagged cp312-abi3 and manylinux.
    module = thdc._thdc.__file__
    if not module.endswith(".abi3.so"):
        fail(f"the module is not the stable-ABI one: {os.path.basename(module)}")
    import importlib.metadata

    distribution = importlib.metadata.distribution("thdc")
    wheel_file = distribution.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel_file.splitlines()
            if line.startswith("Tag:")]
    if not tags or not all(t.startswith("cp312-abi3-manylinux") for t in tags):
        fail(f"the installed wheel is tagged {tags}, not cp312-abi3-manylinux_*")
    print(f"wheel tags: {', '.join(tags)}")

    # The module needs no shared LLVM or MLIR (they are linked in).
    needed = run("readelf", "-d", module).stdout
    for line in needed.splitlines():
        if "NEEDED" in line and ("LLVM" in line or "MLIR" in line):
            fail(f"{os.path.basename(module)} needs a shared LLVM/MLIR: {line.strip()}")
        if "RPATH" in line or "RUNPATH" in line:
            # auditwheel's $ORIGIN/../thdc.libs (the libraries it vendors)
            # is the package's own; any other folder is the building machine's.
            paths = line.split("[", 1)[1].rstrip("]").split(":") if "[" in line else [line]
            if any(not p.startswith("$ORIGIN") for p in paths):
                fail(f"{os.path.basename(module)} names a folder of the building machine: "
                     f"{line.strip()}")
    print(f"{os.path.basename(module)}: {os.path.getsize(module) / 2**20:.1f} MiB, "
          f"needs {sorted(l.split('[')[1].rstrip(']') for l in needed.splitlines() if 'NEEDED' in l)}")

    # The quickstart's CPU path: the JIT compiles the example for the host and
    # checks 100 microbatches against the reference.
    quickstart = os.path.join(root, "examples", "python", "quickstart.py")
    print(run(sys.executable, quickstart).stdout.strip())

    # A JIT compile of the drop-in's own pipeline, run on one microbatch.
    entry = jit_check.compile_and_check(fail)
    print(f"JIT: {entry} compiled for the host, equal to the reference")

    # The commands, as entry points of the package.
    bin_dir = os.path.dirname(sys.executable)
    for tool in ("thdc", "thd-opt", "thd-run"):
        path = shutil.which(tool, path=bin_dir)
        if path is None:
            fail(f"the package installed no {tool} command in {bin_dir}")
        version = run(path, "--version").stdout
        if "thdc" not in version:
            fail(f"{tool} --version printed {version!r}")
    example = os.path.join(root, "examples", "megatron_graph_step.mlir")
    with tempfile.TemporaryDirectory() as work:
        bundle = os.path.join(work, "bundle")
        run(os.path.join(bin_dir, "thdc"), example, "--no-cubin", "-o", bundle)
        manifest = json.load(open(os.path.join(bundle, "manifest.json")))
        if not manifest:
            fail("thdc wrote an empty manifest")
        ir = run(os.path.join(bin_dir, "thd-opt"), example,
                 "--pass-pipeline=builtin.module(thd-bind-params,thd-force-static-shapes)").stdout
        if "thd." not in ir:
            fail("thd-opt printed no thd IR")
        golden = os.path.join(root, "test", "tools", "Inputs", "golden_rank0.json")
        out = os.path.join(work, "out.json")
        run(os.path.join(bin_dir, "thd-run"), example, "--input", golden, "--output", out)
        got = json.load(open(out))
        given = json.load(open(golden))
        want = thdc.reference.graph_step(
            np.array(given["tokens"], np.int64), np.array(given["labels"], np.int64),
            np.array(given["position_ids"], np.int64), np.array(given["loss_mask"], np.float32),
            np.array(given["cu_seqlens"], np.int32), np.array(given["cu_seqlens_padded"], np.int32),
            given["num_seqs"][0], given["cp_rank"][0], 8, 2, 6)
        for name in ("tokens", "labels", "position_ids", "cu_seqlens_padded"):
            if not np.array_equal(np.array(got[name]), want[name]):
                fail(f"thd-run's {name} differs from the reference: {got[name]} vs {want[name]}")
    print("thdc, thd-opt and thd-run: compiled a bundle, printed IR, ran the golden input")
    advise = shutil.which("thdc-advise", path=bin_dir)
    if advise is None:
        fail(f"the package installed no thdc-advise command in {bin_dir}")
    with tempfile.TemporaryDirectory() as work:
        lengths = os.path.join(work, "lengths.txt")
        with open(lengths, "w") as f:
            f.write("100 200 300 4000\n50 60 70 2500 900\n")
        advice = run(advise, lengths, "--C", "4096", "--N", "16").stdout
        if "GraphStep(C=4096, N=16" not in advice:
            fail(f"thdc-advise printed {advice!r}")
    print("thdc-advise: advised a ladder")
    print("check_installed: all checks passed")


if __name__ == "__main__":
    main()
