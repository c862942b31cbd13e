"""The pipelines behind thdc.megatron.GraphStep, one per pipeline-parallel
stage and set of model-side outputs, as `thd` dialect text.

The reference framework's graph-mode step, for one microbatch and one CP
rank (docs/semantics.md S5-S10): the padding mask, padded slots sanitised,
the rank's CP rows, every rank padded to C rows with a dummy sequence over
the tail, the cu arrays padded to N+1 entries, a static max_seqlen of C*cp.
Each pipeline-parallel stage reads part of it:

    stage        data keys it reads                     always
    first        tokens, position_ids                   padding_mask, metadata
    last         labels, loss_mask                      padding_mask, metadata
    middle       -                                      padding_mask, metadata
    first_last   tokens, labels, position_ids,          padding_mask, metadata
                 loss_mask (one stage, or MTP layers)

With dummy_length=L the tail is covered by dummy sequences of L rows over
the spare cu entries (policy split_dummy_sequences) instead of one: causal
attention over a tail of d rows then costs about d*L instead of d^2.

"metadata" is the padded cu arrays, max_seqlen, the status bits and the
dropped-work counts, identical on every stage for the same microbatch. The
model-side outputs are optional:

    seq_idx         the sequence of each of the C*cp rows of the whole packed
                    buffer (every rank), what Mamba layers read, under any cp
    rope_rows       the RoPE table row of each of the rank's C rows (S8, a
                    table of R rows: the parameter R)
    cp_order_index  for each of the C*cp rows in sequence order, the row of
                    the rank-major gather of every rank's C rows that holds
                    it (thd.cp_unslice of the row numbers by the output
                    offsets): `gathered[index]` puts CP-partitioned rows
                    back into sequence order. The dummy sequences over the
                    tail are partitioned like any sequence (zigzag: rank r's
                    tail rows are the dummy's chunks r and 2cp-1-r), which
                    is how TE's partition index, and megatron-core's undo
                    of the partition, read the same offsets
    linear_chunk_*  with linear_chunk=BT, the chunk metadata of linear
                    attention's varlen kernels over the padded offsets (S15):
                    linear_chunk_indices (int32 [2*NT], rows of (sequence,
                    chunk), NT = ceil(C*cp / BT) + N), linear_chunk_offsets
                    ([N+1]) and linear_chunk_count ([1])

This module only writes text and imports nothing from thdc, so a build
script can run it without the package:
    python3 python/thdc/stages.py --stage first --rope > first.mlir
"""
from __future__ import annotations

import argparse
import numbers
import sys
import dataclasses
from typing import Dict, List, Optional, Tuple

STAGES: Dict[str, Tuple[str, ...]] = {
    "first": ("tokens", "position_ids"),
    "last": ("labels", "loss_mask"),
    "middle": (),
    "first_last": ("tokens", "labels", "position_ids", "loss_mask"),
}
CP_MODES = ("zigzag", "contiguous")


@dataclasses.dataclass(frozen=True)
class Field:
    """One input or output of the step's pipeline: the one place that says
    what it is. The pipeline's signature (its text), the step's signature
    check, the slot's buffers and views, and the model-facing members of
    GraphStep and StepSlot are read from INPUTS and OUTPUTS; a new output
    is one row here plus its op in pipeline().

    name: the argument's or result's thd.name. element: its MLIR element
    type. length: the capacity expression of its rows ("C*cp", "N+1", ...;
    "1" for a single value). option: what adds it, None for always;
    "stage" for a data key the stage reads; "data" for what any data key
    brings; else the keyword of pipeline() that asks for it. view: where the
    model gets an output (an attribute of the step and its slots; "batch"
    the batch dict, "packed_seq_params" its PackedSeqParams), or "" for an
    input. doc: what it holds."""

    name: str
    element: str
    length: str
    option: Optional[str]
    view: str
    doc: str

    @property
    def type(self) -> str:
        """Its tensor type in the pipeline's text."""
        return f"tensor<{'1' if self.length == '1' else '?'}x{self.element}>"


# The data keys, in the order of the pipeline's arguments and results: a
# stage reads some of them (STAGES) and gives back its rank's C rows.
DATA: Tuple[Field, ...] = (
    Field("tokens", "i64", "C*cp", "stage", "batch", "token ids"),
    Field("labels", "i64", "C*cp", "stage", "batch", "the next token of each row"),
    Field("position_ids", "i64", "C*cp", "stage", "batch", "each row's position in its sequence"),
    Field("loss_mask", "f32", "C*cp", "stage", "batch", "1.0 where a row's loss counts"),
)

INPUTS: Tuple[Field, ...] = DATA + (
    Field("cu_seqlens", "i32", "N+1", None, "", "valid offsets"),
    Field("cu_seqlens_padded", "i32", "N+1", None, "", "padded offsets"),
    Field("num_seqs", "i32", "1", None, "", "the sequences the offsets hold"),
    Field("num_rows", "i32", "1", "data", "",
          "the data rows the caller copied into the static buffers"),
    Field("cp_rank", "i32", "1", None, "", "the rank's CP rank"),
    Field("rows", "i32", "C*cp", "cp_order_index", "",
          "the row numbers 0..C*cp-1 that thd.cp_unslice permutes"),
)

OUTPUTS: Tuple[Field, ...] = tuple(
    dataclasses.replace(f, length="C") for f in DATA) + (
    Field("padding_mask", "i1", "C", None, "batch", "true on padded rows, the rank's rows"),
    Field("cu_seqlens_padded", "i32", "N+1", None, "packed_seq_params",
          "padded offsets, a dummy sequence over the tail"),
    Field("cu_seqlens", "i32", "N+1", None, "packed_seq_params", "valid offsets, the same"),
    Field("max_seqlen", "i32", "1", None, "packed_seq_params", "the longest padded sequence"),
    Field("seq_idx", "i32", "C*cp", "seq_idx", "seq_idx",
          "the sequence of each row of the whole buffer (every rank)"),
    Field("rope_rows", "i32", "C", "rope", "rope_rows", "each local row's RoPE table row"),
    Field("cp_order_index", "i32", "C*cp", "cp_order_index", "cp_order_index",
          "where each row of the sequence order sits in the rank-major gather"),
    Field("linear_chunk_indices", "i32", "2*NT", "linear_chunk", "linear_chunks",
          "(sequence, chunk) of each chunk of linear attention, sentinels after the count"),
    Field("linear_chunk_offsets", "i32", "N+1", "linear_chunk", "linear_chunks",
          "the chunks before each sequence"),
    Field("linear_chunk_count", "i32", "1", "linear_chunk", "linear_chunks",
          "the chunks of the microbatch"),
    Field("status", "i32", "1", None, "status", "status bits, 0 for a valid microbatch"),
    Field("dropped_seqs", "i32", "1", None, "",
          "the sequences an invalid microbatch claimed (accumulate_dropped)"),
    Field("dropped_tokens", "i32", "1", None, "",
          "the valid tokens an invalid microbatch claimed (accumulate_dropped)"),
)

# The views of OUTPUTS that are attributes of the step and of its slots (the
# others are in the batch dict and the PackedSeqParams), in table order.
ATTRIBUTE_VIEWS = tuple(dict.fromkeys(
    f.view for f in OUTPUTS if f.view not in ("", "batch", "packed_seq_params")))

_FILL = {"i64": "", "f32": " fill 0.0"}
ENTRY = "megatron_step"


# The largest chunk size: BT is an int32 of the pipeline, and a power of two.
LINEAR_CHUNK_MAX = 2**30


def check_linear_chunk(linear_chunk, name: str = "linear_chunk") -> Optional[int]:
    """linear_chunk as an int, or None: ValueError unless it is None or a
    power of two in [1, 2^30] (the chunk size BT of linear attention's
    chunked kernels, S15; an int32 in the pipeline), a Python or NumPy
    integer, never a bool; `name` is the option's name in the message."""
    if linear_chunk is None:
        return None
    if isinstance(linear_chunk, bool) or not isinstance(linear_chunk, numbers.Integral) \
            or not 1 <= linear_chunk <= LINEAR_CHUNK_MAX or linear_chunk & (linear_chunk - 1):
        raise ValueError(f"{name} must be a power of two from 1 to 2^30 (the chunk size BT of "
                         f"linear attention's chunked kernels, e.g. 64) or None; got "
                         f"{linear_chunk!r}")
    return int(linear_chunk)


def linear_chunk_capacity(C: int, cp: int, N: int, linear_chunk: int) -> int:
    """NT, the rows of linear_chunk_indices: ceil(C*cp / BT) + N (S15)."""
    check_linear_chunk(linear_chunk)
    return -(-(C * cp) // linear_chunk) + N


def check_options(stage: str, cp_mode: str, rope: bool, dummy_length=None,
                  linear_chunk=None) -> None:
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {tuple(STAGES)}; got {stage!r}")
    if cp_mode not in CP_MODES:
        raise ValueError(f"cp_mode must be one of {CP_MODES}; got {cp_mode!r}")
    if rope and cp_mode != "zigzag":
        raise ValueError("RoPE table rows follow zigzag CP (thd.rope_positions); "
                         "cp_mode='contiguous' has no rope rows")
    if dummy_length is not None and (isinstance(dummy_length, bool)
                                     or not isinstance(dummy_length, int)
                                     or dummy_length < 1):
        raise ValueError(f"dummy_length must be an int >= 1 (rows of each dummy sequence "
                         f"over the tail) or None; got {dummy_length!r}")
    check_linear_chunk(linear_chunk)


_INT32_MAX = 2**31 - 1


def check_params(C: int, cp: int, N: int, cp_mode: str = "zigzag", R=None,
                 dummy_length=None, linear_chunk=None) -> None:
    """ValueError naming the parameter when (C, cp, N, R) cannot make the
    pipeline, before any text is compiled (the compiler would point into
    the generated text): C, cp >= 1; N >= 2 (N counts the dummy sequence,
    so N - 1 real sequences); zigzag CP with cp > 1 cuts each sequence into
    2*cp chunks, so C is even; C*cp, N + 1 and R fit int32 (the offsets'
    type), as does 2*NT with linear_chunk."""
    if C < 1 or cp < 1:
        raise ValueError(f"C and cp must be >= 1; got C={C}, cp={cp}")
    if N < 2:
        raise ValueError(f"N is the sequence capacity including the dummy sequence that "
                         f"covers the tail, so N >= 2 (N - 1 real sequences); got N={N}")
    if cp_mode == "zigzag" and cp > 1 and C % 2:
        raise ValueError(f"zigzag CP cuts every sequence into 2*cp chunks, so each rank's "
                         f"C rows are even; got C={C} with cp={cp} (use an even C, or "
                         f"cp_mode='contiguous')")
    if dummy_length is not None and cp_mode == "zigzag" and cp > 1 and dummy_length % (2 * cp):
        raise ValueError(f"zigzag CP cuts every sequence into 2*cp chunks, so each dummy "
                         f"sequence's length is a multiple of {2 * cp}; got "
                         f"dummy_length={dummy_length} with cp={cp}")
    sizes = (("C*cp", C * cp), ("N+1", N + 1)) + ((("R", R),) if R else ())
    if linear_chunk is not None:
        sizes += (("2*NT (linear_chunk_indices)",
                   2 * linear_chunk_capacity(C, cp, N, linear_chunk)),)
    for name, value in sizes:
        if value > _INT32_MAX:
            raise ValueError(f"{name} = {value} does not fit the int32 offsets "
                             f"(at most {_INT32_MAX})")


def data_keys(stage: str) -> Tuple[str, ...]:
    """The data keys `stage` reads, in argument order."""
    check_options(stage, "zigzag", False)
    return tuple(f.name for f in DATA if f.name in STAGES[stage])


def _chosen(table: Tuple[Field, ...], stage: str, seq_idx: bool, rope: bool,
            cp_order_index: bool, linear_chunk) -> List[Field]:
    """The rows of `table` a pipeline of these options has, in order."""
    keys = data_keys(stage)
    on = {None: True, "data": bool(keys), "seq_idx": seq_idx, "rope": rope,
          "cp_order_index": cp_order_index, "linear_chunk": linear_chunk is not None}
    return [f for f in table if (f.name in keys if f.option == "stage" else on[f.option])]


def input_fields(stage: str, *, seq_idx: bool = True, rope: bool = False,
                 cp_order_index: bool = False, linear_chunk=None,
                 cp_mode: str = "zigzag", dummy_length=None) -> List[Field]:
    """The pipeline's arguments (INPUTS rows), in order: pipeline()'s
    options, of which cp_mode and dummy_length change no field."""
    return _chosen(INPUTS, stage, seq_idx, rope, cp_order_index, linear_chunk)


def output_fields(stage: str, *, seq_idx: bool = True, rope: bool = False,
                  cp_order_index: bool = False, linear_chunk=None,
                  cp_mode: str = "zigzag", dummy_length=None) -> List[Field]:
    """The pipeline's results (OUTPUTS rows), in order (options as
    input_fields)."""
    return _chosen(OUTPUTS, stage, seq_idx, rope, cp_order_index, linear_chunk)


def inputs(stage: str, **options) -> List[str]:
    """The argument names of the pipeline, in order."""
    return [f.name for f in input_fields(stage, **options)]


def outputs(stage: str, **options) -> List[str]:
    """The result names of the pipeline, in order."""
    return [f.name for f in output_fields(stage, **options)]


LINEAR_CHUNK_OUTPUTS = tuple(f.name for f in OUTPUTS if f.option == "linear_chunk")


def variant(stage: str = "first_last", *, cp_mode: str = "zigzag", seq_idx: bool = True,
            rope: bool = False, cp_order_index: bool = False, dummy_length=None,
            linear_chunk=None) -> str:
    """A short name for a set of options ("" for the defaults), for bundle folders."""
    check_options(stage, cp_mode, rope, dummy_length, linear_chunk)
    parts = [] if stage == "first_last" else [stage]
    parts += [] if cp_mode == "zigzag" else [cp_mode]
    parts += [] if seq_idx else ["noseqidx"]
    parts += ["rope"] * rope + ["cporder"] * cp_order_index
    parts += [] if dummy_length is None else [f"dummy{dummy_length}"]
    parts += [] if linear_chunk is None else [f"linear{linear_chunk}"]
    return "_".join(parts)


def bundle_name(C: int, cp: int, N: int, stage: str = "first_last", *, R=None,
                cp_mode: str = "zigzag", seq_idx: bool = True,
                cp_order_index: bool = False, dummy_length=None, linear_chunk=None) -> str:
    """The folder name of the pipeline's bundle for these parameters (R, the
    RoPE table's rows, only with RoPE rows): what scripts/make-gpu-bundles.sh
    writes and the tests and examples/train load."""
    name = variant(stage, cp_mode=cp_mode, seq_idx=seq_idx, rope=R is not None,
                   cp_order_index=cp_order_index, dummy_length=dummy_length,
                   linear_chunk=linear_chunk)
    return (f"{ENTRY}{'_' + name if name else ''}_C{C}_cp{cp}_N{N}"
            + (f"_R{R}" if R is not None else ""))


def pipeline(stage: str = "first_last", *, cp_mode: str = "zigzag", seq_idx: bool = True,
             rope: bool = False, cp_order_index: bool = False, dummy_length=None,
             linear_chunk=None) -> str:
    """The pipeline's text. Parameters: C rows per CP rank, cp, N the sequence
    capacity (the dummy included) and, with rope, R the RoPE table's rows.
    dummy_length: cover the tail with dummy sequences of that many rows over
    the spare cu entries (policy split_dummy_sequences) instead of one.
    linear_chunk: BT, add linear attention's chunk metadata (S15)."""
    check_options(stage, cp_mode, rope, dummy_length, linear_chunk)
    keys = data_keys(stage)
    mode = cp_mode
    params = "C = 8 : i64, cp = 2 : i64, N = 6 : i64" + (", R = 16 : i64" if rope else "")
    lines: List[str] = []
    out = lines.append
    out(f"// The THD step of the '{stage}' pipeline-parallel stage, {mode} CP"
        + (", with seq_idx" if seq_idx else "") + (", RoPE rows" if rope else "")
        + (", the CP order index" if cp_order_index else "")
        + ("" if dummy_length is None else f", dummy sequences of {dummy_length} rows")
        + ("" if linear_chunk is None else f", linear-attention chunks of {linear_chunk} rows")
        + ".")
    out("// Generated by thdc/stages.py (python3 stages.py --help); thdc.megatron.GraphStep's pipeline.")
    out("")
    out(f"module attributes {{thd.params = {{{params}}}}} {{")
    selected = dict(seq_idx=seq_idx, rope=rope, cp_order_index=cp_order_index,
                    linear_chunk=linear_chunk)

    def argument(f: Field) -> str:
        capacity = "" if f.length == "1" else f', thd.capacity = #thd.expr<"{f.length}">'
        return f'%{f.name}: {f.type} {{thd.name = "{f.name}"{capacity}}}'

    args = [argument(f) for f in input_fields(stage, **selected)]
    results = output_fields(stage, **selected)
    result_types = {f.name: f.type for f in results}
    elements = {f.name: f.element for f in results}
    names = [f.name for f in results]
    out(f"  func.func @{ENTRY}(")
    out(",\n".join("      " + a for a in args) + ")")
    out("      -> (" + ",\n          ".join(
        f'{result_types[n]} {{thd.name = "{n}"}}' for n in names) + ") {")
    out("    // Bad metadata sets status bits and empties the microbatch (%n = 0);")
    out("    // what it claimed is counted as dropped. Offsets that claim more rows")
    out("    // than the caller gave (num_rows) would read an earlier microbatch's.")
    rows = " rows %num_rows" if keys else ""
    out("    %status, %n = thd.validate %cu_seqlens, %cu_seqlens_padded, %cp_rank num_seqs %num_seqs"
        + rows)
    out(f'        cp "cp" mode {mode} max_tokens "C*cp" max_seqs "N" tail_slot : tensor<?xi32>, tensor<?xi32>')
    out("    %dropped_seqs, %dropped_tokens = thd.dropped %status, %cu_seqlens num_seqs %num_seqs")
    out("        : tensor<?xi32>")
    out("    // S5: the padding mask over the packed buffer.")
    out("    %mask = thd.padding_mask %cu_seqlens, %cu_seqlens_padded num_seqs %n capacity \"C*cp\"")
    out("        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi1>")
    # zigzag: slice each key by the microbatch's offsets, then pad every
    # rank's rows to C. contiguous: pad the whole buffer to C*cp first (the
    # dialect refuses padding after a contiguous slice), then give rank r
    # rows [r*C, (r+1)*C) by the padded offsets, whose total is C*cp.
    zigzag = mode == "zigzag"
    slice_by = "%cu_seqlens_padded, %cp_rank num_seqs %n" if zigzag else \
        "%cup_out, %cp_rank num_seqs %num_seqs_out"
    if not zigzag:
        out('    %mask_full = thd.pad_tail %mask target "C*cp" fill true : tensor<?xi1> -> tensor<?xi1>')
    metadata = [
        "    // S10, graph mode: a dummy sequence over the tail, N+1 entries, max_seqlen C*cp.",
        "    %max_seqlen = thd.max_seqlen %cu_seqlens_padded num_seqs %n : tensor<?xi32>",
        "    %cu_out, %cup_out, %max_seqlen_out, %num_seqs_out = thd.pad_tail_metadata",
        "        %cu_seqlens, %cu_seqlens_padded, %max_seqlen num_seqs %n",
        f'        cp "cp" mode {mode} target "C" max_seqs "N" ' + (
            "policy append_dummy_sequence" if dummy_length is None else
            f"policy split_dummy_sequences dummy_length {dummy_length}"),
        "        : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>"]
    if not zigzag:
        lines.extend(metadata)
    mask = "%mask" if zigzag else "%mask_full"
    values = {}
    for k in keys:
        t = result_types[k]
        fill = _FILL[elements[k]]
        out(f"    // {k}: S6 sanitised, S7 this rank's rows"
            + (", S10 padded to C rows." if zigzag else "."))
        out(f"    %{k}_s = thd.sanitize %{k}, {mask}{fill} : {t}, tensor<?xi1>")
        result = f"%{k}_r" if zigzag else f"%{k}_out"
        out(f'    {result} = thd.cp_slice %{k}_s, {slice_by} cp "cp" mode {mode}')
        out(f"        : {t}, tensor<?xi32> -> {t}")
        if zigzag:
            out(f'    %{k}_out = thd.pad_tail %{k}_r target "C"{fill} : {t} -> {t}')
        values[k] = f"%{k}_out"
    result = "%mask_r" if zigzag else "%mask_out"
    out(f'    {result} = thd.cp_slice {mask}, {slice_by} cp "cp" mode {mode}')
    out("        : tensor<?xi1>, tensor<?xi32> -> tensor<?xi1>")
    if zigzag:
        out('    %mask_out = thd.pad_tail %mask_r target "C" fill true : tensor<?xi1> -> tensor<?xi1>')
        lines.extend(metadata)
    values.update({"padding_mask": "%mask_out", "cu_seqlens_padded": "%cup_out",
                   "cu_seqlens": "%cu_out", "max_seqlen": "%max_seqlen_out",
                   "status": "%status", "dropped_seqs": "%dropped_seqs",
                   "dropped_tokens": "%dropped_tokens"})
    if seq_idx:
        out("    // S8: the sequence of every row of the whole buffer (C*cp rows, all ranks).")
        out('    %seq_idx = thd.seq_idx %cup_out num_seqs %num_seqs_out length "C*cp"')
        out("        : tensor<?xi32> -> tensor<?xi32>")
        values["seq_idx"] = "%seq_idx"
    if rope:
        out("    // S8: the RoPE table row of each of the rank's C rows.")
        out("    %rope_rows = thd.rope_positions %cup_out, %cp_rank num_seqs %num_seqs_out")
        out('        max_seqlen %max_seqlen_out cp "cp" length "C" table_rows "R"')
        out("        : tensor<?xi32> -> tensor<?xi32>")
        values["rope_rows"] = "%rope_rows"
    if cp_order_index:
        out("    // Where each row of the sequence order sits in the gather of all ranks' rows:")
        out("    // the inverse of the partition the output offsets describe, the dummy")
        out("    // sequences over the tail partitioned like any sequence (as TE's index")
        out("    // and megatron-core's undo of it read them).")
        out(f'    %cp_order_index = thd.cp_unslice %rows, %cup_out num_seqs %num_seqs_out cp "cp" mode {mode}')
        out('        rows_per_rank "C" : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>')
        values["cp_order_index"] = "%cp_order_index"
    if linear_chunk is not None:
        out("    // S15: linear attention's chunks over the whole sequences (every rank's rows),")
        out("    // the dummy's chunks covering the tail, sentinels after the last chunk.")
        out("    %linear_chunk_indices, %linear_chunk_offsets, %linear_chunk_count =")
        out(f'        thd.linear_chunks %cup_out chunk_size {linear_chunk} rows "C*cp"')
        out("        : tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>")
        values.update({k: f"%{k}" for k in LINEAR_CHUNK_OUTPUTS})
    out("    return " + ", ".join(values[n] for n in names))
    out("        : " + ", ".join(result_types[n] for n in names))
    out("  }")
    out("}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Writes a thdc.megatron.GraphStep pipeline.")
    parser.add_argument("--stage", default="first_last", choices=tuple(STAGES))
    parser.add_argument("--cp-mode", default="zigzag", choices=CP_MODES)
    parser.add_argument("--no-seq-idx", action="store_true")
    parser.add_argument("--rope", action="store_true")
    parser.add_argument("--cp-order-index", action="store_true")
    parser.add_argument("--dummy-length", type=int,
                        help="the tail in dummy sequences of this many rows")
    parser.add_argument("--linear-chunk", type=int, metavar="BT",
                        help="add linear attention's chunk metadata for chunks of BT rows")
    parser.add_argument("--variant", action="store_true",
                        help="print the options' variant name instead of the text")
    parser.add_argument("--bundle-name", metavar="C,cp,N[,R]",
                        help="print the bundle folder name for these parameters instead")
    args = parser.parse_args(argv)
    options = dict(cp_mode=args.cp_mode, seq_idx=not args.no_seq_idx,
                   cp_order_index=args.cp_order_index, dummy_length=args.dummy_length,
                   linear_chunk=args.linear_chunk)
    try:  # a bad option is a usage error, never a traceback
        check_options(args.stage, args.cp_mode, args.rope, args.dummy_length, args.linear_chunk)
    except ValueError as error:
        parser.error(str(error).replace("dummy_length", "--dummy-length")
                     .replace("linear_chunk", "--linear-chunk"))
    if args.bundle_name:
        try:
            values = [int(v) for v in args.bundle_name.split(",")]
        except ValueError:
            values = []
        if len(values) != 3 + args.rope:
            parser.error("--bundle-name takes C,cp,N" + (",R with --rope" if args.rope else ""))
        R = values[3] if args.rope else None
        sys.stdout.write(bundle_name(*values[:3], args.stage, R=R, **options) + "\n")
    elif args.variant:
        sys.stdout.write(variant(args.stage, rope=args.rope, **options) + "\n")
    else:
        sys.stdout.write(pipeline(args.stage, rope=args.rope, **options))
    return 0


if __name__ == "__main__":
    sys.exit(main())
