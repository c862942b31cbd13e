"""thdc.megatron as a package: the face re-exports every public name, and
what a GraphStep gives of its first slot (and a slot of its top rung) is
declared on the class, for readers, help() and tools, while each instance
holds the bound member itself, so a call looks up nothing more than a plain
attribute. Skipped without PyTorch >= 2.10."""
import inspect

import pytest

torch = pytest.importorskip("torch")

import thdc  # noqa: E402

from conftest import megatron_or_skip  # noqa: E402

megatron_or_skip()
import thdc.megatron  # noqa: E402
from thdc.megatron._delegate import Delegated  # noqa: E402


def delegated(cls):
    return {name: member for name, member in vars(cls).items()
            if isinstance(member, Delegated)}


def test_the_face_gives_every_public_name():
    for name in thdc.megatron.__all__:
        assert getattr(thdc.megatron, name) is not None or name == "MEGATRON_CORE_IMPORT_ERROR"
    # Each public class is defined in the module of its concern.
    assert thdc.megatron.GraphStep.__module__ == "thdc.megatron.step"
    assert thdc.megatron.StepSlot.__module__ == "thdc.megatron.slot"
    assert thdc.megatron.StepOptions.__module__ == "thdc.megatron.options"
    assert thdc.megatron.InputLoader.__module__ == "thdc.megatron.loader"
    assert (thdc.megatron.get_batch_on_this_rank_for_sequence_packing.__module__
            == "thdc.megatron.sequence_packing")


def test_members_are_declared_on_the_classes():
    step_members, slot_members = delegated(thdc.megatron.GraphStep), \
        delegated(thdc.megatron.StepSlot)
    for name in ("run", "load_inputs", "outputs", "batch", "packed_seq_params", "status",
                 "exact_rows", "broadcast", "rung", "describe_status", "check_async"):
        assert name in step_members, name
        assert step_members[name].__doc__, name
    for name in ("run", "outputs", "batch", "exact_rows", "broadcast"):
        assert name in slot_members, name
    # Methods keep the delegated function's signature and documentation.
    assert "stream" in inspect.signature(thdc.megatron.GraphStep.run).parameters
    assert thdc.megatron.GraphStep.run.__doc__ == thdc.megatron.SlotRung.run.__doc__
    assert "local_cp_size" in inspect.signature(
        thdc.megatron.GraphStep.load_inputs).parameters
    assert thdc.megatron.StepSlot.__call__ is thdc.megatron.SlotRung.__call__


def test_each_instance_holds_its_members(cache_dir):
    step = thdc.megatron.GraphStep(32, 5, device="cpu", slots=2, cache_dir=cache_dir)
    first, top = step.slot(0), step.slot(0).rungs[-1]
    for name in delegated(thdc.megatron.GraphStep):
        # In the instance's own dict: a plain attribute read on the launch path.
        assert name in vars(step), name
        assert getattr(step, name) is getattr(first, name) or \
            getattr(step, name) == getattr(first, name), name
    for name in delegated(thdc.megatron.StepSlot):
        assert name in vars(first), name
    assert step.run.__self__ is top and step.outputs is top.outputs
    assert step.load_inputs == first._loader.load
    # Called through the class, as a method is.
    batch, params = thdc.megatron.GraphStep.run(step)
    assert batch is step.batch and params is step.packed_seq_params
    # Before bind, or after a del, the descriptor answers from the slot.
    del step.__dict__["status"]
    assert step.status is first.status
