"""The native module's type stub (python/thdc/_thdc.pyi, with py.typed) says
what the module has: every public name of thdc._thdc and of its classes is
in the stub, every name in the stub is in the module, and each function's
parameters in the stub are the binding's (nanobind's own signature text).
Kernel.__call__ is the exception the stub spells out: the binding takes
*args/**kwargs."""
import ast
import inspect
import os
import re

import thdc
import thdc._thdc as native

STUB = os.path.join(os.path.dirname(thdc.__file__), "_thdc.pyi")


def stub_tree():
    return ast.parse(open(STUB, encoding="utf-8").read())


def public(names):
    return {n for n in names if not n.startswith("_") or n in ("__call__", "__init__")}


def stub_names():
    """{name: None for a top-level name, {member: args} for a class,
    args for a function}."""
    names = {}
    for node in stub_tree().body:
        if isinstance(node, ast.ClassDef):
            members = {}
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    members[item.name] = [a.arg for a in item.args.args[1:] + item.args.kwonlyargs]
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


def test_the_stub_and_py_typed_ship_with_the_package():
    assert os.path.exists(STUB)
    assert os.path.exists(os.path.join(os.path.dirname(thdc.__file__), "py.typed"))


def test_every_name_of_the_module_is_in_the_stub_and_no_other():
    stub = stub_names()
    module = public(dir(native)) - {"annotations"}
    assert module - set(stub) == set(), "names of thdc._thdc missing from _thdc.pyi"
    if native.has_jit:  # a runtime-only build lacks the compiler's names
        assert set(stub) - module == set(), "names in _thdc.pyi that thdc._thdc lacks"
    for name, members in stub.items():
        if not isinstance(members, dict):
            continue
        cls = getattr(native, name)
        # A class without a bound constructor has Python's slot wrapper as
        # __init__ (no signature to state).
        own = public(n for n in vars(cls) if not n.startswith("__") or n == "__call__"
                     or (n == "__init__" and hasattr(vars(cls)[n], "__nb_signature__")))
        properties = {n for n in own if isinstance(vars(cls)[n], property)}
        declared = set(members)
        stub_properties = {n for node in stub_tree().body if isinstance(node, ast.ClassDef)
                           and node.name == name for n in
                           (i.name for i in node.body if isinstance(i, ast.FunctionDef)
                            and any(getattr(d, "id", None) == "property"
                                    for d in i.decorator_list))}
        assert own - declared == set(), f"{name}: members missing from the stub"
        assert declared - own == set(), f"{name}: members in the stub the class lacks"
        assert properties == stub_properties, f"{name}: properties differ"


def test_each_functions_parameters_are_the_bindings():
    stub = stub_names()
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
                if isinstance(function, property):
                    continue
                assert parameters == binding_parameters(function), f"{name}.{member}"
                checked += 1
    assert checked >= 15
    # The exception: what the stub promises is what a call accepts.
    params = inspect.signature(lambda *inputs, out=None, stream=None, device=None,
                               **named_inputs: None).parameters
    assert stub["Kernel"]["__call__"] == [p for p in params if p not in ("inputs",
                                                                          "named_inputs")]
