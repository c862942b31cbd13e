"""Fails when the modules of a Python package import each other in a circle,
or when a module imports a face: the __init__.py of a package that holds it,
which only re-exports (a submodule takes each name from the module that
defines it). Every import counts, those inside functions too: a lazy import
closes a circle as surely, only later. Only those under `if TYPE_CHECKING:`
do not: they never run.

A module points to the module an import names: `from . import x` and
`from .x import y` point to x (to x.y where that is a module), `import a.b`
to a.b. Modules that no module left points to, or that point to none left,
are removed until none goes; what is left lies on a circle and is reported
with the imports that close it (as CheckIncludeCycles.cmake does for the
C++ folders).

    python3 check_python_imports.py <package folder>    e.g. python/thdc
"""
import ast
import os
import sys


# A package's own file: its __init__.py, or the __init__.pyi of a package of
# stubs (a compiled module's, with a stub per submodule).
_PACKAGE_FILES = ("__init__.py", "__init__.pyi")


def modules_of(folder: str) -> dict:
    """{dotted name: path} of every .py file under the package `folder`, and
    of every .pyi stub without one (a compiled module's: its imports are
    the stub's)."""
    root = os.path.dirname(os.path.abspath(folder))
    found = {}
    for directory, _, files in os.walk(folder):
        for name in files:
            stem, extension = os.path.splitext(name)
            if extension not in (".py", ".pyi") or (
                    extension == ".pyi" and stem + ".py" in files):
                continue
            path = os.path.join(directory, name)
            parts = os.path.relpath(path, root)[:-len(extension)].split(os.sep)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(module: str, path: str, known: dict) -> list:
    """(line, target module) of every import of `path` that names a module
    of the package."""
    is_package = os.path.basename(path) in _PACKAGE_FILES
    package = module if is_package else module.rpartition(".")[0]
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = []

    def longest_known(name: str):
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    def type_checking(node) -> bool:
        test = node.test
        return isinstance(node, ast.If) and (
            (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))

    def walk(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and type_checking(child):
                yield from (n for other in child.orelse for n in ast.walk(other))
                continue
            yield child
            yield from walk(child)

    for node in walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = longest_known(alias.name)
                if target:
                    found.append((node.lineno, target))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base not in known and longest_known(base) is None:
                continue  # not the package's
            for alias in node.names:
                child = f"{base}.{alias.name}"
                target = child if child in known else longest_known(base)
                found.append((node.lineno, target))
    return found


def check(folder: str) -> list:
    """The problems of the package in `folder`, as lines to print."""
    known = modules_of(folder)
    edges = {m: sorted({(line, t) for line, t in imports_of(m, p, known) if t != m})
             for m, p in known.items()}
    rel = lambda m: os.path.relpath(known[m])
    problems = []
    for module, imports in sorted(edges.items()):
        if os.path.basename(known[module]) in _PACKAGE_FILES:
            continue
        for line, target in imports:
            if module.startswith(target + "."):
                problems.append(f"{rel(module)}:{line}: imports the face {target} "
                                f"({rel(target)}): take the name from the module that "
                                f"defines it")
    # Peel off modules that nothing left points to, or that point to
    # nothing left; what stays lies on a circle.
    left = set(edges)
    while True:
        pointed = {t for m in left for _, t in edges[m] if t in left}
        pointing = {m for m in left if any(t in left for _, t in edges[m])}
        keep = left & pointed & pointing
        if keep == left:
            break
        left = keep
    for module in sorted(left):
        for line, target in edges[module]:
            if target in left:
                problems.append(f"{rel(module)}:{line}: imports {target}, on a circle")
    return problems, len(known)


def main(argv) -> int:
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: check_python_imports.py <package folder>", file=sys.stderr)
        return 2
    problems, count = check(argv[1])
    if problems:
        print(f"{argv[1]}: modules import a face or each other in a circle:")
        for problem in problems:
            print("  " + problem)
        return 1
    print(f"{count} modules of {argv[1]}: no circle, no face imported")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
