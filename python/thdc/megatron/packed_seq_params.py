"""PackedSeqParams, the attention metadata megatron-core's model reads:
megatron-core's class when it is installed (imported where first needed:
it takes seconds and prints warnings), else one with the same fields; and
the constructor that fills only the fields the installed release declares."""
from __future__ import annotations

import dataclasses
import inspect
from typing import Optional, Tuple

from .._checks import _import_torch

torch = _import_torch("thdc.megatron")


@dataclasses.dataclass
class _FallbackPackedSeqParams:
    """The fields of megatron-core's PackedSeqParams that THD attention reads."""

    qkv_format: Optional[str] = None
    cu_seqlens_q: Optional[torch.Tensor] = None
    cu_seqlens_kv: Optional[torch.Tensor] = None
    cu_seqlens_q_padded: Optional[torch.Tensor] = None
    cu_seqlens_kv_padded: Optional[torch.Tensor] = None
    max_seqlen_q: Optional[int] = None
    max_seqlen_kv: Optional[int] = None
    local_cp_size: Optional[int] = None
    cp_group: Optional[object] = None
    total_tokens: Optional[int] = None
    seq_idx: Optional[torch.Tensor] = None
    tokens_per_sample: Optional[int] = None
    pad_between_seqs: Optional[bool] = None
    cp_partition_mode: str = "zigzag"


_FallbackPackedSeqParams.__name__ = _FallbackPackedSeqParams.__qualname__ = "PackedSeqParams"
# megatron-core is imported where its class is first needed (a step's
# PackedSeqParams, or these names read), not with this module: importing it
# takes seconds and prints warnings on a machine that only plans or loads.
_MEGATRON_CORE = None


def _megatron_core():
    """(PackedSeqParams, USING_MEGATRON_CORE, MEGATRON_CORE_IMPORT_ERROR):
    megatron-core's class when it is installed, else the same fields here;
    the import is tried once."""
    global _MEGATRON_CORE
    if _MEGATRON_CORE is None:
        import sys
        import warnings

        try:
            with warnings.catch_warnings():
                # The import is thdc's, not the user's: the warnings
                # megatron-core and the libraries it tries raise while it
                # loads (no Apex, no TransformerEngine, deprecations) are
                # theirs to show where the user imports them.
                if "megatron.core" not in sys.modules:
                    warnings.filterwarnings(
                        "ignore", module=r"(megatron|transformer_engine|apex)(\.|$)")
                from megatron.core.packed_seq_params import PackedSeqParams as found

            _MEGATRON_CORE = (found, True, None)
        except Exception as error:  # ImportError, or a megatron-core that fails to import
            _MEGATRON_CORE = (_FallbackPackedSeqParams, False,
                              f"{type(error).__name__}: {error}")
    return _MEGATRON_CORE


def packed_seq_params_fields(cls=None) -> Tuple[str, ...]:
    """The fields the PackedSeqParams class (default: the installed one)
    accepts at construction."""
    cls = _megatron_core()[0] if cls is None else cls
    if dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls) if f.init)
    parameters = inspect.signature(cls).parameters.values()
    return tuple(p.name for p in parameters
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


# Fields whose value changes what the params mean, and what a class without
# the field means by default: such a field on a class that lacks it is
# refused with another value (the class cannot say it); every other field
# a class lacks is left out (its release does not read it: a release
# without cp_partition_mode, 0.19.2, reads no CP layout, so a contiguous
# step's params are still right there).
_MEANING_WITHOUT_FIELD = {
    "pad_between_seqs": (None, False, "the 'compact' convention; use convention='graph'"),
}


def make_packed_seq_params(cls=None, **fields):
    """A PackedSeqParams (default: the installed class) with the given fields
    the class declares. A field it lacks is left out, unless its value says
    what the class cannot: `pad_between_seqs=True` (the 'compact'
    convention) on a release without the field raises ValueError."""
    cls = _megatron_core()[0] if cls is None else cls
    known = set(packed_seq_params_fields(cls))
    for name, (*implied, what) in _MEANING_WITHOUT_FIELD.items():
        if name in fields and name not in known and fields[name] not in implied:
            raise ValueError(f"{cls.__module__}.{cls.__name__} has no {name} field, so it "
                             f"cannot describe {what}")
    return cls(**{k: v for k, v in fields.items() if k in known})
