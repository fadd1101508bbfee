"""The generated front pages (issue 54): BENCHMARKS.md's summary, docs/benchmarks-history.md,
results/README.md's summary and the layout section of docs/getting-started.md are what their
indexes generate (`python scripts/pages.py`), each summary fits one screen and lists only current
figures, every number of the results summary is read from the committed files, and the layout walks
whatever rooms the package has.

    PYTHONPATH=$PWD .venv/bin/python -m pytest tests/docs/test_pages.py -q
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from repo_paths import ROOT

_spec = importlib.util.spec_from_file_location("pages", ROOT / "scripts" / "pages.py")
pages = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pages)


def block(text: str, name: str) -> str:
    m = re.search(rf"<!-- pages:{name} start[^\n]*-->\n(.*?)<!-- pages:{name} end -->", text, re.DOTALL)
    assert m, f"no {name} block"
    return m.group(1)


def table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| ---")][1:]


@pytest.fixture(scope="module")
def generated():
    return pages.pages()


def test_every_committed_page_is_what_its_index_generates(generated):
    stale = [p for p, text in generated.items() if (ROOT / p).read_text(encoding="utf-8") != text]
    assert not stale, f"{stale} differ from their indexes: run python scripts/pages.py"


def test_each_summary_fits_one_screen(generated):
    assert 10 <= len(table_rows(block(generated[pages.BENCHMARKS], "summary"))) <= pages.MAX_ROWS
    assert 5 <= len(table_rows(block(generated[pages.RESULTS], "summary"))) <= pages.MAX_ROWS


def test_the_benchmarks_summary_lists_current_figures_by_rank_and_history_the_rest(generated):
    figures = pages.load_figures()
    now, old = pages.current(figures), [f for f in figures if "rank" not in f]
    summary, history = block(generated[pages.BENCHMARKS], "summary"), block(generated[pages.HISTORY], "history")
    rows = table_rows(summary)
    assert [r.split("](")[0][3:] for r in rows] == [pages.cell(f["figure"]) for f in now[: len(rows)]]
    assert all(f"[{pages.cell(f['figure'])}]" in summary for f in now)  # the rest named under the table
    assert old and not [f["id"] for f in old if pages.cell(f["value"]) in summary]
    assert len(table_rows(history)) == len(old) and all(pages.cell(f["value"]) in history for f in old)
    # the default that replaced the 5-variant grid leads; the grid (now tiny-ablation) is history
    assert now[0]["id"] == "reproduce-default"
    assert {"tiny-ablation-default", "tiny-full-exploratory"} <= {f["id"] for f in old}


def test_every_figure_points_at_a_section_that_exists():
    for f in pages.load_figures():
        path, _, anchor = f["section"].partition("#")
        page = path or pages.BENCHMARKS
        assert anchor in pages.anchors(ROOT / page), f"{f['id']}: no heading #{anchor} in {page}"


def _figures_root(tmp_path: Path, entries: list[dict]) -> Path:
    (tmp_path / "benchmarks").mkdir(parents=True)
    (tmp_path / pages.FIGURES).write_text(yaml.safe_dump(entries))
    return tmp_path


def test_the_figures_index_refuses_a_broken_chain_a_shared_rank_and_an_unquoted_date(tmp_path):
    base = {"figure": "f", "value": "v", "machine": "m", "date": "2026-12-06", "command": "c", "section": "#s"}
    ok = [{**base, "id": "new", "rank": 1, "supersedes": ["old"]}, {**base, "id": "old", "superseded_by": "new"}]
    assert len(pages.load_figures(_figures_root(tmp_path / "a", ok))) == 2
    bad = {
        "chain": [ok[0], {**base, "id": "old", "rank": 2}],
        "rank": [{**base, "id": "a", "rank": 1}, {**base, "id": "b", "rank": 1}],
        "date": [{**base, "id": "a", "rank": 1, "date": None}],
    }
    for name, entries in bad.items():
        with pytest.raises(pages.IndexError_):
            pages.load_figures(_figures_root(tmp_path / name, entries))


def test_every_results_number_is_read_from_the_committed_table(tmp_path):
    """A figure follows table.csv: change the committed row and the summary's number changes."""
    spec = {"task": "sudoku_tiny", "variant": "+DACA", "vs": "baseline", "mde": True}
    assert pages.figure(ROOT / "results" / "tiny", spec, "t") == "+4.3 [+1.2, +7.5] (MDE 4.6)"
    folder = tmp_path / "tiny"
    folder.mkdir()
    text = (ROOT / "results" / "tiny" / "table.csv").read_text()
    (folder / "table.csv").write_text(text.replace(",+DACA,33.38,baseline,4.339,", ",+DACA,33.38,baseline,9.939,"))
    assert pages.figure(folder, spec, "t").startswith("+9.9 [")
    with pytest.raises(pages.IndexError_):  # a selector matching no row, or two
        pages.figure(folder, {"variant": "+SML", "vs": "baseline"}, "t")


def test_the_results_index_refuses_a_number_typed_into_found(tmp_path):
    (tmp_path / "results" / "tiny").mkdir(parents=True)
    shutil.copy(ROOT / "results" / "tiny" / "table.csv", tmp_path / "results" / "tiny")
    run = {
        "folder": "tiny",
        "date": "2026-12-06",
        "what": "w",
        "kind": "exploratory",
        "starts": 1,
        "figures": {"d": {"variant": "+DACA", "vs": "baseline"}},
    }
    (tmp_path / pages.RESULTS_INDEX).write_text(yaml.safe_dump([{**run, "found": "+DACA {d}"}]))
    assert pages.load_runs(tmp_path)
    (tmp_path / pages.RESULTS_INDEX).write_text(yaml.safe_dump([{**run, "found": "+DACA +4.3 [+1.2, +7.5]"}]))
    with pytest.raises(pages.IndexError_, match="by hand"):
        pages.load_runs(tmp_path)


def test_the_results_summary_puts_confirmatory_runs_first_with_their_registered_design(generated):
    runs = pages.load_runs()
    rows = table_rows(block(generated[pages.RESULTS], "summary"))
    kinds = ["confirmatory" if "**confirmatory**" in r else "exploratory" for r in rows]
    assert kinds == sorted(kinds) and kinds[0] == "confirmatory"
    for run in runs:
        folder = ROOT / "results" / run["folder"]
        designs = [p for p in (folder / "design.json", folder / "design.registered.json") if p.is_file()]
        assert (run["kind"] == "confirmatory") <= (folder / "design.json").is_file(), run["folder"]
        if run.get("design"):
            assert json.loads(designs[0].read_text())["commit"] == run["design"]["commit"], run["folder"]


def test_the_layout_lists_every_module_of_the_package(generated):
    text = block(generated[pages.LAYOUT_PAGE], "layout")
    for path in (ROOT / "daca_bench").rglob("*.py"):
        if path.name != "__init__.py" and "_data" not in path.parts:
            assert f"| `{path.stem}` |" in text or f"/{path.stem}` |" in text, path
    assert "(no docstring)" not in text


def test_the_layout_walks_a_new_room_at_its_rank(tmp_path):
    """Generic: a room folder the table ranks appears under its rank with its modules' first sentences."""
    pkg = tmp_path / "daca_bench"
    (pkg / "engine").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""The base."""\n')
    (pkg / "types.py").write_text('"""Types. More here."""\n')
    (pkg / "engine" / "__init__.py").write_text('"""The engine room.\n\nMay import: the base."""\n')
    (pkg / "engine" / "mesh.py").write_text('"""The device mesh: degrees and groups. Try it: ..."""\n')
    rooms = '[tool.daca-bench.rooms]\n"daca_bench.engine" = 2\n"daca_bench.eval" = 4\n'
    (tmp_path / "pyproject.toml").write_text(rooms)
    text = pages.layout(tmp_path)
    assert "the base < `engine/`" in text and "### `daca_bench.engine` (rank 2)" in text
    assert "| `mesh` | The device mesh: degrees and groups. |" in text and "May import: the base." in text
    assert "eval" not in text  # a ranked room with no folder yet is skipped
