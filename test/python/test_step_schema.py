"""The step's inputs and outputs are declared once, in thdc.stages (INPUTS,
OUTPUTS), and the load's arguments once, in the runtime
(runtime/InputLoad.h, thdc._thdc.InputGather.ARGUMENTS): everything else
reads them. These tests fail when a second list of the fields appears in
the package, or when a piece that reads them falls out of step."""
import ast
import inspect
import os

import pytest

import thdc
from thdc import stages
from thdc._thdc import InputGather

PACKAGE = os.path.dirname(thdc.__file__)
FIELDS = {f.name for f in stages.INPUTS + stages.OUTPUTS}


def second_lists(source: str, path: str = "<source>"):
    """Literal tuples, lists, sets and dict keys of three or more of the
    step's field names in `source`: each a list the schema should give."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            values = node.elts
        elif isinstance(node, ast.Dict):
            values = [k for k in node.keys if k is not None]
        else:
            continue
        names = [v.value for v in values if isinstance(v, ast.Constant) and v.value in FIELDS]
        # The views' builders (_views._ATTRIBUTES) are keyed by the views the
        # schema names, one entry a view: how each is shaped, not a list.
        keys = {v.value for v in values if isinstance(v, ast.Constant)}
        if isinstance(node, ast.Dict) and keys == set(stages.ATTRIBUTE_VIEWS):
            continue
        if len(names) >= 3:
            found.append(f"{path}:{node.lineno}: {names}")
    return found


def package_sources():
    for folder, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            if name.endswith((".py", ".pyi")):
                path = os.path.join(folder, name)
                if os.path.relpath(path, PACKAGE) != "stages.py":
                    yield path


def test_no_second_list_of_the_fields_in_the_package():
    found = []
    for path in package_sources():
        with open(path) as f:
            found += second_lists(f.read(), os.path.relpath(path, PACKAGE))
    assert not found, ("the step's fields are listed outside thdc.stages (read "
                       "stages.INPUTS / OUTPUTS instead):\n" + "\n".join(found))


def test_the_check_finds_a_second_list():
    source = ('KEYS = ("tokens", "labels", "cu_seqlens")\n'
              'TYPES = {"seq_idx": 1, "status": 2, "max_seqlen": 3}\n'
              'OK = ("tokens", "labels")\n')
    assert [line.split(":")[1] for line in second_lists(source)] == ["1", "2"]


def test_the_load_arguments_are_the_runtimes():
    """The Python entry points take the runtime's load arguments, in its
    order, then the batch keys the reference framework's loader adds."""
    import thdc.megatron
    from thdc.megatron.loader import InputLoader

    arguments = list(InputGather.ARGUMENTS)
    assert arguments[-1] == "num_seqs" and "tokens" in arguments
    entries = {"InputLoader.load": InputLoader.load,
               "StepSlot.load_inputs": thdc.megatron.StepSlot.load_inputs,
               "SlotRung.__call__": thdc.megatron.SlotRung.__call__}
    for name, function in entries.items():
        parameters = list(inspect.signature(function).parameters)[1:]
        assert parameters[:len(arguments)] == arguments, name
        assert {"max_seqlen", "local_cp_size"} <= set(parameters), name


def test_every_attribute_view_is_built_and_given():
    """Each view of stages.ATTRIBUTE_VIEWS has its builder and is a member of
    StepSlot and GraphStep (typed there, for readers and checkers)."""
    import thdc.megatron
    from thdc.megatron import _views

    assert set(_views._ATTRIBUTES) == set(stages.ATTRIBUTE_VIEWS)
    for view in stages.ATTRIBUTE_VIEWS:
        assert view in vars(thdc.megatron.StepSlot), view
        assert view in vars(thdc.megatron.GraphStep), view


@pytest.mark.parametrize("stage", list(stages.STAGES))
def test_the_pipeline_text_declares_the_schemas_fields(stage):
    """The generated signature names the schema's rows, with their types."""
    import re

    options = dict(seq_idx=True, rope=True, cp_order_index=True, linear_chunk=64)
    text = stages.pipeline(stage, **options)
    head = text[text.index("func.func"):text.index(") {")]
    arguments, results = head.split("->")
    declared = lambda part: re.findall(r'(tensor<[^>]+>) \{thd.name = "(\w+)"', part)
    assert declared(arguments) == [(f.type, f.name)
                                   for f in stages.input_fields(stage, **options)]
    assert declared(results) == [(f.type, f.name)
                                 for f in stages.output_fields(stage, **options)]
