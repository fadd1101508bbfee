"""Issue 45's "done when": the sort4 walk of tasks/README.md, run as written from a folder laid out like
a fresh clone (tests/docs/test_documented_commands.py's), with the small step counts its docs-test comment
names: scaffold -> check -> show -> the task's test -> SFT -> train the headline's baseline and +DACA
-> a grid of the headline's cells with a start row -> table -> plot -> notebook. The task is
registered through --tasks-dir only; `daca-bench table` gives the same table with and without it."""

import json
import os
import subprocess
import sys

import pytest
from test_documented_commands import ROOT, _clone, blocks

PAGE = ROOT / "tasks" / "README.md"
TRAIN_KEYS = ("train", "loss", "dps", "sml", "rollout", "eval", "model")


def walk():
    """The walk's block and its commands with the docs-test comment's arguments appended."""
    (block,) = [
        b
        for b in blocks(PAGE)
        if b.lang == "bash"
        and any("new-task sort4" in c for c in b.commands)
        and any("papermill" in c for c in b.commands)
    ]
    out = []
    for command in block.commands:
        words = command.split()
        sub = words[1] if words[0] == "daca-bench" and len(words) > 1 else None
        out.append(f"{command} {block.append[sub]}" if sub in block.append else command)
    return block, out


def test_the_walk_is_documented_in_order():
    block, commands = walk()
    order = [
        "new-task sort4",
        "--check sort4",
        "--show sort4",
        "pytest",
        "daca-bench sft",
        "--variant baseline",
        "--variant +DACA",
        "headline:+DACA",
        "daca-bench ablate",
        "daca-bench table",
        "daca-bench plot",
        "papermill",
    ]
    at = [next(i for i, c in enumerate(commands) if step in c) for step in order]
    assert at == sorted(at), commands
    assert {"sft", "train", "ablate"} <= set(block.append)  # small steps where the test runs it
    table = next(c for c in commands if c.startswith("daca-bench table"))
    assert "--tasks-dir" not in table  # the table is built where the task is not registered
    assert (
        "README.md#from-the-scaffold-to-a-table-and-a-figure-the-sort4-walk)"
        in (ROOT / "docs" / "tasks.md").read_text()
    )


@pytest.mark.slow
def test_the_sort4_walk_runs_as_documented_and_its_table_needs_no_registration(tmp_path):
    block, commands = walk()
    clone = _clone(tmp_path, block)
    env = {
        **{k: v for k, v in os.environ.items() if k != "DACA_BENCH_TASKS"},
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    script = "\n".join(commands) + "\n"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-s"],
        input=script,
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, f"{script}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    grid = clone / "runs" / "sort4-grid"
    unregistered = {name: (grid / name).read_text() for name in ("table.md", "table.csv")}
    # the same table with the task registered at table time
    again = subprocess.run(
        [sys.executable, "-m", "daca_bench", "table", "--tasks-dir", "my_tasks", "runs/sort4-grid"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr
    assert {name: (grid / name).read_text() for name in unregistered} == unregistered
    text = unregistered["table.md"]
    rows = {r.split("|")[3].strip(): r for r in text.splitlines() if r.startswith("| constraint | sort4 |")}
    assert list(rows) == ["start", "baseline", "+DACA"]  # the start row, the baseline against it, +DACA against that
    assert "| start |" in rows["baseline"] and "| baseline |" in rows["+DACA"]
    assert "+DACA: DPS progress, SML causal, K = 4" in text and "+36.3" not in text  # what ran; no paper gain
    assert all(r.rstrip().endswith("|  |") for r in rows.values())
    # the grid's cells are the single runs of train --variant (seed 0), key for key
    for variant, run in (("baseline", "sort4-base"), ("+DACA", "sort4-daca")):
        cell = json.loads((grid / f"variant=headline_{variant}_seed=0" / "config.json").read_text())
        single = json.loads((clone / "runs" / run / "config.json").read_text())
        assert {k: cell[k] for k in TRAIN_KEYS} == {k: single[k] for k in TRAIN_KEYS}, variant
    assert (grid / "start" / "sort4" / "eval.jsonl").is_file()
    assert all((grid / f"{name}.png").is_file() for name in ("gains", "curves", "training", "dps"))
    nb = json.loads((clone / "runs" / "sort4.ipynb").read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert outputs and not [o for o in outputs if o["output_type"] == "error"]
    assert any("sort4" in "".join(o.get("data", {}).get("text/markdown", "")) for o in outputs)
