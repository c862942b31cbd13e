"""One JIT compile of the drop-in's own pipeline, run on one microbatch and
compared with the reference semantics: what check_installed.py and
check_old_glibc.py ask of an installed thdc. Imports only thdc and NumPy
(check_old_glibc.py runs where subprocess cannot be imported)."""
import numpy as np


def compile_and_check(fail) -> str:
    """Compiles and runs the step; calls fail(MESSAGE) on a difference.
    Returns the kernel's entry point's name."""
    import thdc
    from thdc import stages

    C, cp, N = 64, 2, 8
    kernel = thdc.compile(stages.pipeline(), {"C": C, "cp": cp, "N": N}, backend="host")
    rng = np.random.default_rng(1)
    lengths = np.array([10, 7, 20, 3])
    padded = (lengths + 2 * cp - 1) // (2 * cp) * (2 * cp)
    rows = C * cp
    inputs = dict(
        tokens=rng.integers(1, 1000, rows), labels=rng.integers(1, 1000, rows),
        position_ids=np.arange(rows), loss_mask=np.ones(rows, np.float32),
        cu_seqlens=np.resize(np.concatenate([[0], np.cumsum(lengths)]), N + 1).astype(np.int32),
        cu_seqlens_padded=np.resize(np.concatenate([[0], np.cumsum(padded)]), N + 1).astype(np.int32),
        num_seqs=np.array([len(lengths)], np.int32), cp_rank=np.array([1], np.int32),
        num_rows=np.array([int(padded.sum())], np.int32))
    names = {arg.name for arg in thdc.signature(kernel) if arg.direction == "input"}
    outputs = kernel(**{k: v for k, v in inputs.items() if k in names})
    expected = thdc.reference.graph_step(
        inputs["tokens"], inputs["labels"], inputs["position_ids"], inputs["loss_mask"],
        inputs["cu_seqlens"], inputs["cu_seqlens_padded"], len(lengths), 1, C, cp, N,
        rows_given=int(padded.sum()))
    if int(np.asarray(outputs.status)[0]) != expected["status"]:
        fail("the JIT-compiled drop-in step's status differs from the reference")
    for name in ("tokens", "labels", "position_ids", "loss_mask", "cu_seqlens_padded"):
        if not np.array_equal(np.asarray(getattr(outputs, name)), expected[name]):
            fail(f"the JIT-compiled drop-in step's {name} differs from the reference")
    return kernel.entry
