"""The package's modules form layers: no module imports, directly or round
about, one that imports it back (issue 36: client.py, hold.py, aio.py and
renewals.py imported each other in a circle). Every import counts, also one
inside a function or under ``if TYPE_CHECKING:``: a module that needs
another's names to be read, type-checked or run depends on it. And each
module imports alone in a fresh interpreter."""
import ast
import os
import subprocess
import sys
from typing import Dict, List, Set

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(PROJECT, "leaseclient")


def modules() -> List[str]:
    return sorted(f[:-3] for f in os.listdir(PACKAGE) if f.endswith(".py"))


def imports_of(name: str, known: Set[str]) -> Set[str]:
    """The package's modules `name` imports, wherever in the file."""
    with open(os.path.join(PACKAGE, name + ".py"), encoding="utf-8") as f:
        tree = ast.parse(f.read(), name + ".py")
    out: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 or (node.level == 0 and node.module and
                                   node.module.split(".")[0] == "leaseclient"):
                mod = (node.module or "").split(".")
                mod = mod[1:] if node.level == 0 else mod
                if mod and mod[0]:
                    out.add(mod[0])
                else:  # from . import x, y
                    out.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "leaseclient" and len(parts) > 1:
                    out.add(parts[1])
    return {m for m in out if m in known and m != name}


def graph() -> Dict[str, Set[str]]:
    names = set(modules()) - {"__init__"}  # the package's face imports everything
    return {m: imports_of(m, names) for m in sorted(names)}


def find_circle(g: Dict[str, Set[str]]) -> List[str]:
    """One circle of g as [a, b, ..., a], or [] when there is none."""
    state: Dict[str, int] = {}  # 1: on the path, 2: done
    path: List[str] = []

    def visit(n: str) -> List[str]:
        state[n] = 1
        path.append(n)
        for m in sorted(g[n]):
            if state.get(m) == 1:
                return path[path.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        path.pop()
        state[n] = 2
        return []

    for n in sorted(g):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return []


def test_the_import_reader_sees_a_circle_when_there_is_one():
    # the checker itself: a circle planted in a made-up graph is found
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_round_about():
    g = graph()
    assert "client" in g and "hold" in g and g["hold"], g  # the reader read real imports
    circle = find_circle(g)
    edges = "\n".join(f"  {m} -> {', '.join(sorted(g[m])) or '-'}" for m in g)
    print(f"\nleaseclient's import graph:\n{edges}")
    assert not circle, "modules that import each other in a circle: " + " -> ".join(circle)


def test_each_module_imports_alone_in_a_fresh_interpreter():
    for m in modules():
        name = "leaseclient" if m == "__init__" else "leaseclient." + m
        out = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=PROJECT,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, f"import {name}: {out.stderr}"
