"""notebooks/ablations.ipynb runs as documented (papermill with its `parameters` cell), on a committed
folder and on a grid of a task of one's own, shows the table and every figure and no error; and
the committed copy carries its outputs (executed on results/tiny-full) for GitHub to show."""

import json
import os
import re
from pathlib import Path

import nbformat
import papermill

from daca_bench.cli import main

from repo_paths import ROOT

NOTEBOOK = ROOT / "notebooks" / "ablations.ipynb"
FIGURES = ("gains", "curves", "training", "dps")


def _run(out: Path, **parameters) -> nbformat.NotebookNode:
    """The documented command, as papermill's API: from the repository root, the parameters given with -p."""
    papermill.execute_notebook(
        str(NOTEBOOK), str(out), parameters=parameters, cwd=str(ROOT), kernel_name="python3", progress_bar=False
    )
    return nbformat.read(out, as_version=4)


def _outputs(nb) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


def _figures_shown(nb) -> list[str]:
    """The figure names of the cells that showed a PNG (`figs["NAME"]`)."""
    return [
        m.group(1)
        for c in nb.cells
        if c.cell_type == "code" and any("image/png" in o.get("data", {}) for o in c.outputs)
        for m in [re.search(r'figs\["(\w+)"\]\s*$', c.source)]
        if m
    ]


def _table_rows(nb) -> list[list[str]]:
    """The rows of the table's comparison blocks (those headed like the first; not the ledger's block)."""
    text = "\n".join(o.get("data", {}).get("text/markdown", "") for o in _outputs(nb))
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| ")]
    return [r for r in rows if len(r) == len(rows[0])] if rows else rows


def test_the_documented_command_is_in_the_notebook_and_the_docs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    first = nb.cells[0]
    command = "papermill notebooks/ablations.ipynb"
    assert first.cell_type == "markdown" and command in first.source and "-p results" in first.source
    assert command in (ROOT / "docs" / "ablations.md").read_text()
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and "results =" in tagged[0].source and "tasks_dir =" in tagged[0].source
    # papermill parses every parameter (no "Passed unknown parameter: tasks_dir" warning at -p tasks_dir)
    assert set(papermill.inspect_notebook(str(NOTEBOOK))) == {"results", "tasks_dir"}


def test_committed_notebook_shows_its_outputs_from_tiny_full():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert not [o for o in _outputs(nb) if o.output_type == "error"]
    assert _figures_shown(nb) == list(FIGURES)
    assert any("tiny-full" in str(o.get("data", {}).get("text/plain", "")) for o in _outputs(nb))


def test_notebook_runs_on_a_committed_folder_with_the_start_row(tmp_path):
    nb = _run(tmp_path / "out.ipynb", results="results/tiny-full")
    assert not [o for o in _outputs(nb) if o.output_type == "error"]
    assert _figures_shown(nb) == list(FIGURES)
    rows = _table_rows(nb)
    head = rows[0]
    by_variant = {r[head.index("variant")]: r for r in rows[1:] if r[head.index("task")] == "sudoku_tiny"}
    assert "start" in by_variant  # the RL start's row
    baseline = by_variant["baseline"]
    assert baseline[head.index("vs")] == "start" and baseline[head.index("Δpp")] not in ("", "-")  # its gain


GRID = {
    "base": "configs/tiny.yaml",
    "axes": {"variant": ["baseline", "+DACA"]},
    "overrides": {
        "train.task": "even_length",
        "train.steps": 3,
        "train.eval_every": 1,
        "train.prompts_per_step": 2,
        "train.num_generations": 4,
        "train.n_eval": 4,
        "train.init": "",
        "train.threads": 1,
        "rollout.block_length": 4,
        "rollout.steps": 4,
        "eval.block_length": 4,
        "eval.steps": 4,
    },
}


def test_notebook_runs_on_a_grid_of_ones_own_task(tmp_path, monkeypatch):
    """A 2-cell grid of the task double even_length (tests/task_doubles), evaluated during training:
    the notebook finds the task through its tasks_dir parameter alone and draws every figure."""
    (tmp_path / "grid.yaml").write_text(json.dumps(GRID))
    out = tmp_path / "grid"
    tasks = ROOT / "tests" / "task_doubles"
    assert (
        main(
            [
                "ablate",
                str(tmp_path / "grid.yaml"),
                "--tasks-dir",
                str(tasks),
                "--output-dir",
                str(out),
                "--workers",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    assert any("test_accuracy" in line for line in (out / "variant=+DACA" / "metrics.jsonl").read_text().splitlines())
    monkeypatch.delenv("DACA_BENCH_TASKS", raising=False)  # the kernel learns of the task from the parameter only
    nb = _run(tmp_path / "out.ipynb", results=str(out), tasks_dir=str(tasks))
    assert not [o for o in _outputs(nb) if o.output_type == "error"]
    assert _figures_shown(nb) == list(FIGURES)
    rows = _table_rows(nb)
    assert {r[rows[0].index("task")] for r in rows[1:]} == {"even_length"}
    assert os.environ.get("DACA_BENCH_TASKS") is None
