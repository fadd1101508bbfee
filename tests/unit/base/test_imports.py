"""The shape of the package (issue 31): no import circle among daca_bench modules: a static check of every import statement,
module-level or inside a function, resolved to daca_bench modules, then the strongly connected
components of that graph (each of size > 1 is a circle); no module over 450 lines; and no folder of
the package, the tests or the benchmarks with more than 15 modules."""

import ast
import tomllib
from pathlib import Path

import pytest

from repo_paths import ROOT

PACKAGE = ROOT / "daca_bench"


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST):
    """Every Import / ImportFrom node, except those under `if TYPE_CHECKING:` (never run)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in _imports(ast.Module(body=[child], type_ignores=[])))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node)


def graph() -> dict[str, set[str]]:
    """module -> the daca_bench modules it imports at run time (a package's __init__ stands for
    `from pkg import x` only where x is not a module of its own)."""
    modules = {_name(p): p for p in PACKAGE.rglob("*.py")}
    edges = {m: set() for m in modules}
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in modules:  # `import daca_bench.x.y` of a name: its module
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    edges[mod].add(t)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_checker_finds_a_planted_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    code = "import os\nif TYPE_CHECKING:\n    from .x import y\ndef f():\n    from . import z\n"
    assert [ast.unparse(n) for n in _imports(ast.parse(code))] == ["import os", "from . import z"]


def test_the_tables_libraries_import_no_circle():
    """results, render, plan, replicate, replication, agreement, design, clusters, stats and the table
    command: none in a circle."""
    ours = {
        f"daca_bench.experiments.analysis.{m}"
        for m in ("results", "render", "plan", "replicate", "replication", "agreement", "design", "clusters", "stats")
    } | {"daca_bench.experiments.commands.table"}
    assert not [c for c in circles(graph()) if ours & set(c)]


def test_no_import_circle_among_daca_bench_modules():
    found = circles(graph())
    assert not found, f"import circles: {found}"


def test_no_module_of_the_package_or_the_sandbox_is_over_450_lines():
    """Issue 31: modules stay small enough to read top to bottom (the sandbox test checks its own too)."""
    roots = (PACKAGE, PACKAGE.parent / "sandbox")
    sizes = {
        str(p.relative_to(PACKAGE.parent)): len(p.read_text().splitlines()) for r in roots for p in r.rglob("*.py")
    }
    assert sizes and not {p: n for p, n in sizes.items() if n > 450}


# Issue 43: the rooms, lowest first. A module may import its own room and any room ranked below it,
# never one above. The shared base (top-level modules, archs, containers, testing) is rank 0. The
# ranks live in pyproject.toml ([tool.daca-bench.rooms]), which scripts/pages.py reads for the layout page.
ROOMS = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["daca-bench"]["rooms"]


def rank(module: str) -> int:
    """The rank of the room that holds `module` (its longest matching room name; 0 for the base)."""
    rooms = [r for r in ROOMS if module == r or module.startswith(r + ".")]
    return ROOMS[max(rooms, key=len)] if rooms else 0


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets if rank(b) > rank(a))


def test_the_direction_checker_finds_a_planted_upward_import():
    assert upward_imports({"daca_bench.experiments.analysis.results": {"daca_bench.experiments.grid.jobs"}}) == [
        "daca_bench.experiments.analysis.results -> daca_bench.experiments.grid.jobs"
    ]
    assert (
        upward_imports(
            {
                "daca_bench.experiments.grid.jobs": {
                    "daca_bench.experiments.analysis.results",
                    "daca_bench.rl.sampler",
                    "daca_bench.config",
                }
            }
        )
        == []
    )
    assert rank("daca_bench.rl.bases.spg") == rank("daca_bench.rl") and rank("daca_bench.models") == 0


def test_the_rooms_table_is_read_and_ordered():
    """The table in pyproject.toml is the one the checks use (an empty table would pass them all)."""
    order = [
        "daca_bench.rewards",
        "daca_bench.rl",
        "daca_bench.experiments.analysis",
        "daca_bench.experiments.grid",
        "daca_bench.experiments.studies",
        "daca_bench.experiments.commands",
    ]
    assert [ROOMS[r] for r in order] == sorted(ROOMS[r] for r in order) and ROOMS["daca_bench.rewards"] >= 1
    assert len({ROOMS[r] for r in order}) == len(order)


def test_no_module_imports_a_room_above_it():
    assert not upward_imports(graph()), upward_imports(graph())


def folder_sizes(top: Path) -> dict[str, int]:
    """Each folder under `top` (itself included) -> its .py modules, the __init__ not counted."""
    return {
        str(d.relative_to(top.parent)): len([p for p in d.glob("*.py") if p.name != "__init__.py"])
        for d in [top, *top.rglob("*")]
        if d.is_dir() and "__pycache__" not in d.parts
    }


@pytest.mark.parametrize("top", ["daca_bench", "tests", "benchmarks"])
def test_no_folder_holds_more_than_15_modules(top):
    """Issues 43, 54: a room a newcomer can read from its listing, in the package, the tests (conftest
    and helper modules count) and the benchmarks."""
    sizes = folder_sizes(ROOT / top)
    assert len(sizes) > 1 and not {d: n for d, n in sizes.items() if n > 15}, sizes


def test_the_folder_count_sees_a_planted_crowd(tmp_path):
    crowded = tmp_path / "crowded"
    crowded.mkdir()
    for i in range(16):
        (crowded / f"m{i}.py").write_text("")
    (crowded / "__init__.py").write_text("")
    assert {Path(d).name: n for d, n in folder_sizes(tmp_path).items()} == {tmp_path.name: 0, "crowded": 16}


def test_every_room_says_what_it_holds_and_may_import():
    for room in ("analysis", "figures", "grid", "studies", "commands"):
        doc = (PACKAGE / "experiments" / room / "__init__.py").read_text()
        assert "May import" in doc, room
    for room in ("engine", "rl", "train"):
        assert "May import" in (PACKAGE / room / "__init__.py").read_text(), room


def test_the_engine_imports_no_algorithm_and_the_algorithm_no_run_loop():
    """Issue 54: engine (rank 2) < rl (3) < train (5); the checker sees an arrow the other way."""
    assert rank("daca_bench.engine.parallel") < rank("daca_bench.rl.sampler") < rank("daca_bench.train.loop")
    edges = graph()
    assert not [
        (a, b)
        for a, bs in edges.items()
        for b in bs
        if a.startswith("daca_bench.engine") and not b.startswith("daca_bench.engine") and rank(b) > 1
    ]
    assert not [
        (a, b)
        for a, bs in edges.items()
        for b in bs
        if a.startswith("daca_bench.rl") and b.startswith("daca_bench.train")
    ]
