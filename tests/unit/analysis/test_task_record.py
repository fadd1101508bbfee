"""A cell knows its task (issue 45): the trainer writes the task's family, version, cluster key and
each scored prompt's cluster into summary.json (`task_record`), so the table of the same cells has the
same numbers with the task registered or not; cells without the record (older runs) whose task is not
registered stop the table with one line naming the fix, never a silent `?` family and clusters of one."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from daca_bench import registry
from daca_bench.cli import main
from daca_bench.config import RLConfig, apply
from daca_bench.errors import ConfigError
from daca_bench.experiments.analysis.render import to_csv, to_markdown
from daca_bench.experiments.analysis.results import load_table

# a user's task, as a new user writes it: sort four digits; the puzzles of one multiset of digits
# share their answer, so they cluster (and split) by it
SORT4 = """
import random

from daca_bench.registry import register_task
from daca_bench.rewards.scoring import correct_if, hash_split, no_answer, stable_seed
from daca_bench.types import Sample, Task


def _sample(digits):
    return Sample(f"sort4/{digits}", f"sort {digits}\\n", "".join(sorted(digits)), {"digits": "".join(sorted(digits))})


def verify(sample, completion):
    answer = completion.strip()
    return correct_if(answer == sample.target) if answer else no_answer()


@register_task("sort4", family="constraint", version=3, cluster="digits", description="sort four digits")
def sort4(split="test", n=None, seed=0, records=None):
    if records is not None:
        return Task("sort4", "constraint", 3, [_sample(r["digits"]) for r in records], verify, split)
    rng, out = random.Random(stable_seed("sort4", split, seed)), {}
    for _ in range(100000):
        d = "".join(rng.choice("0123456789") for _ in range(4))
        if hash_split("sort4/" + "".join(sorted(d))) == ("train" if split == "train" else "test"):
            out.setdefault(d, _sample(d))
        if len(out) == (n or 64):
            break
    return Task("sort4", "constraint", 3, list(out.values()), verify, split)
"""


@pytest.fixture
def sort4(tmp_path, monkeypatch):
    """sort4 registered from a task folder for the test (the registry as it was afterwards)."""
    registry.list_tasks()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    folder = tmp_path / "my_tasks"
    folder.mkdir()
    (folder / "sort4.py").write_text(SORT4)
    registry.load_file(folder / "sort4.py")
    yield folder
    sys.modules.pop("daca_bench_tasks.sort4", None)


def test_the_trainer_records_the_task_and_each_scored_prompt_s_cluster(sort4, tmp_path):
    from daca_bench.train.trainer import train

    cfg = apply(
        RLConfig(),
        {
            "train": {
                "task": "sort4",
                "steps": 1,
                "prompts_per_step": 2,
                "num_generations": 2,
                "n_eval": 6,
                "threads": 1,
                "save_every": 1,
            },
            "rollout": {"gen_length": 8, "block_length": 4, "steps": 4},
            "eval": {"gen_length": 8, "block_length": 4, "steps": 4},
        },
    )
    summary = train(cfg, tmp_path / "cell", progress=False)
    on_disk = json.loads((tmp_path / "cell" / "summary.json").read_text())
    assert on_disk["task_record"] == summary["task_record"]
    record = summary["task_record"]
    assert {k: record[k] for k in ("name", "family", "version", "cluster")} == {
        "name": "sort4",
        "family": "constraint",
        "version": 3,
        "cluster": "digits",
    }
    scored = [json.loads(line)["id"] for line in (tmp_path / "cell" / "eval.jsonl").read_text().splitlines()]
    test = {s.id: s for s in registry.get_task("sort4", split="test", n=6).samples}
    assert record["clusters"] == {i: test[i].metadata["digits"] for i in scored}


def _cells(folder: Path, with_record: bool) -> None:
    """2 variants x 4 seeds on 60 sort4 test prompts of few clusters, written as the trainer writes them;
    a planted cluster effect makes the clustered interval wider than a per-prompt one."""
    samples = registry.get_task("sort4", split="test", n=60).samples
    record = registry.task_record("sort4", samples)
    assert len(set(record["clusters"].values())) < 60
    rng = np.random.default_rng(0)
    effect = {c: rng.normal(0, 0.3) for c in set(record["clusters"].values())}
    for variant, (dps, k) in {"baseline": (False, 1), "+DACA": (True, 4)}.items():
        for seed in range(4):
            cell = folder / f"variant={variant}_seed={seed}"
            cell.mkdir(parents=True)
            bump = 0.15 if variant == "+DACA" else 0.0
            rewards = {s.id: float(rng.random() < 0.4 + bump + effect[record["clusters"][s.id]]) for s in samples}
            (cell / "config.json").write_text(
                json.dumps(
                    {
                        "train": {"task": "sort4", "seed": seed, "n_eval": 60},
                        "loss": {"base": "grpo"},
                        "dps": {"enabled": dps},
                        "sml": {"k": k},
                    }
                )
            )
            (cell / "axes.json").write_text(json.dumps({"variant": variant}))
            summary = {
                "task": "sort4",
                "test_accuracy": float(np.mean(list(rewards.values()))),
                **({"task_record": record} if with_record else {}),
            }
            (cell / "summary.json").write_text(json.dumps(summary))
            (cell / "eval.jsonl").write_text(
                "".join(
                    json.dumps({"id": i, "completion": "", "reward": r, "status": "correct" if r else "wrong"}) + "\n"
                    for i, r in rewards.items()
                )
            )


def test_a_table_of_the_same_cells_is_the_same_with_the_task_registered_or_not(sort4, tmp_path, monkeypatch):
    _cells(tmp_path / "run", with_record=True)
    registered = load_table(tmp_path / "run")
    row = registered.set_index("variant").loc["+DACA"]
    assert row["family"] == "constraint" and row["clusters"] < row["prompts"] == 60
    _cells(tmp_path / "old", with_record=False)  # the same cells without the record: the registry supplies it
    assert to_csv(load_table(tmp_path / "old")) == to_csv(registered)
    monkeypatch.delitem(registry._REGISTRY, "sort4")  # a machine that does not know sort4
    unknown = load_table(tmp_path / "run")
    assert to_csv(unknown) == to_csv(registered) and to_markdown(unknown) == to_markdown(registered)


def test_old_cells_of_an_unregistered_task_stop_the_table_with_the_fix(sort4, tmp_path, monkeypatch, capsys):
    _cells(tmp_path / "old", with_record=False)
    monkeypatch.delitem(registry._REGISTRY, "sort4")
    with pytest.raises(ConfigError, match="task 'sort4' is not registered here.*--tasks-dir DIR.*DACA_BENCH_TASKS"):
        load_table(tmp_path / "old")
    assert main(["table", str(tmp_path / "old")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("daca-bench table: ") and "--tasks-dir" in err and "plug-in" in err and "\n" not in err
    assert not (tmp_path / "old" / "table.md").exists()


def test_the_clusters_a_cell_records_win_over_the_registry_s(sort4, tmp_path, monkeypatch):
    """The cells' record is what they were scored under: a later change of the task's cluster key
    (or its absence on this machine) changes nothing in their table."""
    _cells(tmp_path / "run", with_record=True)
    before = to_csv(load_table(tmp_path / "run"))
    spec = registry._REGISTRY["sort4"]
    monkeypatch.setitem(registry._REGISTRY, "sort4", type(spec)(**{**spec.__dict__, "cluster": None}))
    assert to_csv(load_table(tmp_path / "run")) == before


def test_a_preset_s_comparisons_plan_the_rows_by_task_whatever_the_family_label(sort4, tmp_path):
    """A preset labels a family by its own name ("sorting": sort4), and the cells record the task's
    family ("constraint"): the rows the preset planned are primary / secondary, on publish as on a
    rebuild (publish writes config.json before the tables), never exploratory for a label mismatch."""
    _cells(tmp_path / "run" / "cells", with_record=True)
    row = lambda v, vs: {"family": "sorting", "task": "sort4", "variant": v, "vs": vs}  # noqa: E731
    spec = {"comparisons": {"primary": [row("+DACA", "baseline")], "secondary": []}}
    (tmp_path / "run" / "config.json").write_text(json.dumps({"preset_spec": spec}))
    table = load_table(tmp_path / "run").set_index("variant")
    assert table.loc["+DACA", "plan"] == "primary"
