"""The native module's type stubs (python/thdc/_thdc/: __init__.pyi for
thdc._thdc, planner.pyi and reference.pyi for its submodules, with py.typed)
say what each module has: every public name of the module and of its
classes is in its stub, every name in the stub is in the module, and each
function's parameters in the stub are the binding's (nanobind's own
signature text). Kernel.__call__ is the exception the stub spells out: the
binding takes *args/**kwargs."""
import ast
import inspect
import os
import re

import thdc
import thdc._thdc as native

import pytest

STUBS = os.path.join(os.path.dirname(thdc.__file__), "_thdc")
# (module, its stub)
MODULES = [(native, "__init__.pyi"), (native.planner, "planner.pyi"),
           (native.reference, "reference.pyi")]
STUB = os.path.join(STUBS, "__init__.pyi")


def stub_tree(stub=STUB):
    return ast.parse(open(stub, encoding="utf-8").read())


def public(names):
    return {n for n in names if not n.startswith("_") or n in ("__call__", "__init__")}


def stub_names(stub=STUB):
    """{name: None for a top-level name (a submodule imported too), {member:
    args} for a class, args for a function}."""
    names = {}
    for node in stub_tree(stub).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names.update((alias.asname or alias.name, None) for alias in node.names)
        if isinstance(node, ast.ClassDef):
            members = {}
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    members[item.name] = [a.arg for a in item.args.args[1:] + item.args.kwonlyargs]
                elif isinstance(item, ast.AnnAssign):  # a class attribute
                    members[item.target.id] = None
            names[node.name] = members
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = [a.arg for a in node.args.args + node.args.kwonlyargs]
        elif isinstance(node, ast.AnnAssign):
            names[node.target.id] = None
    return names


def binding_parameters(function):
    """The parameter names of a nanobind function, from its signature text."""
    text = getattr(function, "__nb_signature__", None)
    if text:
        signature = text[0][0]
    else:
        signature = function.__doc__.split("\n")[0]
    inside = signature[signature.index("(") + 1:signature.rindex(")")]
    return [p.split(":")[0].split("=")[0].strip().lstrip("*") for p in
            re.split(r",\s*(?![^\[]*\])", inside) if p.strip() and p.strip() not in ("*", "/")
            and p.split(":")[0].strip() != "self"]


def test_the_stubs_and_py_typed_ship_with_the_package():
    for _, name in MODULES:
        assert os.path.exists(os.path.join(STUBS, name)), name
    assert os.path.exists(os.path.join(os.path.dirname(thdc.__file__), "py.typed"))
    # The folder of stubs does not hide the module from Python.
    assert os.path.basename(native.__file__).startswith("_thdc.")


@pytest.mark.parametrize("native, stub_file", MODULES, ids=[m[1] for m in MODULES])
def test_every_name_of_the_module_is_in_the_stub_and_no_other(native, stub_file):
    stub_path = os.path.join(STUBS, stub_file)
    stub = stub_names(stub_path)
    stub_tree_of = lambda: stub_tree(stub_path)
    module = public(dir(native)) - {"annotations"}
    assert module - set(stub) == set(), f"names of {native.__name__} missing from {stub_file}"
    if thdc._thdc.has_jit:  # a runtime-only build lacks the compiler's names
        assert set(stub) - module == set(), f"names in {stub_file} that {native.__name__} lacks"
    for name, members in stub.items():
        if not isinstance(members, dict):
            continue
        cls = getattr(native, name)
        # Special methods the binding defines (__init__, __len__, __repr__,
        # ...) carry nanobind's signature; a class without a bound
        # constructor has Python's slot wrapper as __init__ (none to state).
        own = {n for n in vars(cls) if not n.startswith("_") or n == "__call__"
               or (n.startswith("__") and hasattr(vars(cls)[n], "__nb_signature__"))}
        properties = {n for n in own if isinstance(vars(cls)[n], property)}
        declared = set(members)
        stub_properties = {n for node in stub_tree_of().body if isinstance(node, ast.ClassDef)
                           and node.name == name for n in
                           (i.name for i in node.body if isinstance(i, ast.FunctionDef)
                            and any(getattr(d, "id", None) == "property"
                                    for d in i.decorator_list))}
        assert own - declared == set(), f"{name}: members missing from the stub"
        assert declared - own == set(), f"{name}: members in the stub the class lacks"
        assert properties == stub_properties, f"{name}: properties differ"


@pytest.mark.parametrize("native, stub_file", MODULES, ids=[m[1] for m in MODULES])
def test_each_functions_parameters_are_the_bindings(native, stub_file):
    stub = stub_names(os.path.join(STUBS, stub_file))
    checked = 0
    for name, entry in stub.items():
        obj = getattr(native, name, None)
        if obj is None:  # not in a runtime-only build
            continue
        if isinstance(entry, list):
            assert entry == binding_parameters(obj), name
            checked += 1
        elif isinstance(entry, dict):
            for member, parameters in entry.items():
                if (name, member) == ("Kernel", "__call__"):
                    continue  # spelled out in the stub; the binding takes *args/**kwargs
                function = vars(obj)[member]
                if isinstance(function, property) or parameters is None:
                    continue  # a property or a class attribute: no parameters
                assert parameters == binding_parameters(function), f"{name}.{member}"
                checked += 1
    assert checked >= 3
    if native is not thdc._thdc:
        return
    assert checked >= 15
    # The exception: what the stub promises is what a call accepts.
    params = inspect.signature(lambda *inputs, out=None, stream=None, device=None,
                               **named_inputs: None).parameters
    assert stub["Kernel"]["__call__"] == [p for p in params if p not in ("inputs",
                                                                          "named_inputs")]
