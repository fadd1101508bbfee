import json
import math
from pathlib import Path

import numpy as np
import pytest

from daca_bench.config import ConfigError, apply, to_dict
from daca_bench.experiments.analysis.render import write_tables
from daca_bench.experiments.analysis.results import load_results
from daca_bench.experiments.grid.ablation import VARIANTS, expand
from daca_bench.experiments.grid.executors import _run_cell, run_local

from repo_paths import ROOT

QUICK = {
    "train.task": "even_length",
    "train.steps": 2,
    "train.prompts_per_step": 2,
    "train.num_generations": 4,
    "train.n_eval": 4,
    "train.init": "",
    "train.threads": 1,
    "rollout.block_length": 4,
    "rollout.steps": 4,
    "eval.block_length": 4,
    "eval.steps": 4,
}


def test_grid_expands_to_the_cartesian_product_with_named_folders():
    grid = {
        "base": "configs/tiny.yaml",
        "overrides": {"train.steps": 7},
        "axes": {"variant": list(VARIANTS)[:4], "train.seed": [0, 1], "loss.base": ["grpo", "gspo"]},
    }
    cells = expand(grid, ROOT)
    assert len(cells) == 16 and len({c.name for c in cells}) == 16
    daca = next(c for c in cells if c.axes == {"variant": "+DACA", "train.seed": 1, "loss.base": "gspo"})
    assert daca.name == "variant=+DACA_seed=1_base=gspo"
    assert daca.config.dps.enabled and daca.config.sml.k == 4 and daca.config.train.steps == 7
    assert daca.config.loss.base == "gspo" and daca.config.train.seed == 1


def test_grid_errors_name_the_problem():
    with pytest.raises(ConfigError, match="unknown variant"):
        expand({"axes": {"variant": ["+DSP"]}})
    with pytest.raises(ConfigError, match="train.steps"):
        expand({"axes": {"train.stepz": [1]}})
    with pytest.raises(ConfigError, match="a grid has base"):
        expand({"axis": {}})


def test_cells_skip_when_finished_resume_when_not_and_failures_are_reported(tmp_path):
    cells = expand({"overrides": QUICK, "axes": {"variant": ["baseline", "+DACA"]}})
    bad = expand({"overrides": {**QUICK, "train.task": "no_such_task"}, "axes": {"variant": ["+DPS"]}})[0]
    results = run_local([*cells, bad], tmp_path, workers=2, retries=1, progress=False)
    status = {r["cell"]: r["status"] for r in results}
    assert status == {"variant=baseline": "done", "variant=+DACA": "done", "variant=+DPS": "failed"}
    assert "unknown task" in (tmp_path / "variant=+DPS" / "error.txt").read_text()
    assert _run_cell(cells[0], str(tmp_path), 1, 0)["status"] == "skipped"
    # an unfinished cell (summary removed, checkpoint kept) resumes and does not redo its steps
    (tmp_path / "variant=baseline" / "summary.json").unlink()
    assert _run_cell(cells[0], str(tmp_path), 1, 0)["status"] == "done"
    assert len((tmp_path / "variant=baseline" / "metrics.jsonl").read_text().splitlines()) == 2
    df = load_results(tmp_path)
    assert sorted(df["variant"]) == ["+DACA", "baseline"]
    # the plots and the notebook read these real results
    from daca_bench.experiments.figures.plots import plot_all

    names = {p.name for p in plot_all(tmp_path)}
    assert {"gains.png", "gains.pdf", "curves.png", "dps.png"} <= names
    examples = json.loads((tmp_path / "variant=+DACA" / "dps_examples.json").read_text())
    assert len(examples[0]["tokens"]) == len(examples[0]["weights"]) > 0
    _execute_notebook(tmp_path)


def _execute_notebook(results=None):
    """Run the notebook as Jupyter does: its kernel started in notebooks/."""
    import os

    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "notebooks" / "ablations.ipynb", as_version=4)
    if results is not None:
        os.environ["DACA_RESULTS"] = str(results)
    try:
        NotebookClient(
            nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "notebooks")}}
        ).execute()
    finally:
        os.environ.pop("DACA_RESULTS", None)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)
    assert not {p.name for p in (ROOT / "notebooks").iterdir()} - {"ablations.ipynb", ".ipynb_checkpoints"}


def test_notebook_opens_the_committed_results_from_notebooks_folder():
    _execute_notebook()  # the default DACA_RESULTS, relative to the repository root


def _fake_cell(folder: Path, task, variant, seed, acc, base="grpo", prompts=None):
    cell = folder / f"{base}_{task}_{variant}_{seed}"
    cell.mkdir(parents=True)
    dps, k = {"baseline": (False, 1), "+DPS": (True, 1), "+SML": (False, 4), "+DACA": (True, 4)}[variant]
    (cell / "config.json").write_text(
        json.dumps(
            {"train": {"task": task, "seed": seed}, "loss": {"base": base}, "dps": {"enabled": dps}, "sml": {"k": k}}
        )
    )
    (cell / "axes.json").write_text(json.dumps({"variant": variant}))
    (cell / "summary.json").write_text(json.dumps({"test_accuracy": acc}))
    if prompts is not None:
        _write_eval(cell, prompts)


def _write_eval(folder: Path, prompts: dict):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "eval.jsonl").write_text(
        "".join(json.dumps({"id": i, "completion": "", "reward": r, "status": "x"}) + "\n" for i, r in prompts.items())
    )


def test_table_paired_by_seed_when_cells_have_no_per_prompt_results(tmp_path):
    base = {0: 0.10, 1: 0.20, 2: 0.30}
    dps = {0: 0.12, 1: 0.23, 2: 0.31}  # paired differences 2, 3, 1 pp
    for seed in base:
        _fake_cell(tmp_path, "arithmetic", "baseline", seed, base[seed])
        _fake_cell(tmp_path, "arithmetic", "+DPS", seed, dps[seed])
    table, paths = write_tables(tmp_path)
    row = table.set_index("variant").loc["+DPS"]
    assert row["family"] == "math" and row["paper_gain_pp"] == 5.6
    assert table.set_index("variant").loc["baseline", "acc"] == pytest.approx(20.0)
    assert row["delta_pp"] == pytest.approx(2.0) and row["vs"] == "baseline"
    half = 4.303 * 1.0 / math.sqrt(3)  # t(0.975, 2) x sd / sqrt(3): the seeds-only interval
    assert (row["lo"], row["hi"]) == (pytest.approx(2.0 - half, abs=1e-3), pytest.approx(2.0 + half, abs=1e-3))
    assert row["t_half"] == pytest.approx(half, abs=1e-3)
    assert row["MDE"] > half  # 80 % power needs more than the interval's half-width
    md = paths[0].read_text()
    assert "| +DPS | 22.0 | +2.0 | baseline | [-0.5, +4.5] |" in md and "+5.6" in md and "MDE" in md
    assert "MDE" in paths[1].read_text().splitlines()[0].split(",")
    assert all(p.exists() for p in paths)


def test_table_pairs_by_prompt_and_measures_the_baseline_against_its_start(tmp_path):
    """Four seeds x 200 prompts with a planted +10 pp for +DPS on a fixed test set: the interval
    excludes 0 (marked) and the MDE is far below the seeds-only one; the baseline's gain over its
    RL start is measured on the same prompts."""
    rng = np.random.default_rng(0)
    ids = [f"arithmetic/{i}" for i in range(200)]
    p = rng.beta(2, 3, size=len(ids))
    start = {i: float(rng.random() < q) for i, q in zip(ids, p)}
    for seed in range(4):
        b = {i: float(rng.random() < q) for i, q in zip(ids, p)}
        v = {i: float(rng.random() < min(1, q + 0.10)) for i, q in zip(ids, p)}
        b[ids[0]] = None  # an unscorable prompt drops out of every pairing that needs it
        _fake_cell(
            tmp_path, "arithmetic", "baseline", seed, np.mean([x for x in b.values() if x is not None]), prompts=b
        )
        _fake_cell(tmp_path, "arithmetic", "+DPS", seed, np.mean(list(v.values())), prompts=v)
    _write_eval(tmp_path / "start" / "arithmetic", start)
    table, paths = write_tables(tmp_path)
    t = table.set_index("variant")
    assert t.loc["+DPS", "prompts"] == 199 and t.loc["+DPS", "seeds"] == 4
    assert t.loc["+DPS", "sig"] and t.loc["+DPS", "lo"] > 0 and 5 < t.loc["+DPS", "delta_pp"] < 15
    assert t.loc["+DPS", "MDE"] < 8
    assert t.loc["baseline", "vs"] == "start" and abs(t.loc["baseline", "delta_pp"]) < t.loc["baseline", "MDE"] * 1.5
    assert t.loc["start", "acc"] == pytest.approx(100 * np.mean(list(start.values())))
    assert "+DPS" in paths[0].read_text() and " * |" in paths[0].read_text()


@pytest.mark.slow
def test_ray_executor_runs_cells_on_a_local_ray_instance(tmp_path):
    import ray

    from daca_bench.experiments.grid.executors import init_ray, run_ray

    cells = expand({"overrides": QUICK, "axes": {"variant": ["baseline", "+DPS"]}})
    init_ray(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"DACA_BENCH_TASKS": str(ROOT / "tests" / "task_doubles"), "PYTHONPATH": str(ROOT)}},
    )
    try:
        results = run_ray(cells, tmp_path, progress=False)
    finally:
        ray.shutdown()
    assert [r["status"] for r in results] == ["done", "done"]
    assert len(load_results(tmp_path)) == 2


def test_a_slow_ray_start_is_tried_again_and_any_other_failure_is_not(monkeypatch):
    """A unit-test double of ray.init beside the real start above: Ray's fixed 30 s node-start wait, missed on a
    loaded machine, is retried (issue 56 item 8); a wrong address is raised at once."""
    ray = pytest.importorskip("ray")
    from daca_bench.experiments.grid.executors import init_ray

    calls = []

    def slow_then_up(**kw):
        calls.append(kw)
        if len(calls) == 1:
            raise Exception("The current node timed out during startup. This could happen because ...")

    monkeypatch.setattr(ray, "init", slow_then_up)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    init_ray(num_cpus=2)
    assert calls == [{"num_cpus": 2}, {"num_cpus": 2}]
    monkeypatch.setattr(ray, "init", lambda **kw: (_ for _ in ()).throw(ConnectionError("no cluster at 1.2.3.4")))
    with pytest.raises(ConnectionError):
        init_ray(address="1.2.3.4")


def test_a_cell_written_under_another_config_is_set_aside_and_rerun(tmp_path):
    cell = expand({"overrides": QUICK, "axes": {"variant": ["baseline"]}})[0]
    assert _run_cell(cell, str(tmp_path), 1, 0)["status"] == "done"
    assert _run_cell(cell, str(tmp_path), 1, 0)["status"] == "skipped"
    changed = expand({"overrides": {**QUICK, "train.lr": 1e-3}, "axes": {"variant": ["baseline"]}})[0]
    result = _run_cell(changed, str(tmp_path), 1, 0)
    assert result["status"] == "done" and result["replaced"].endswith(".stale/0")
    folder = tmp_path / "variant=baseline"
    assert json.loads((folder / "config.json").read_text())["train"]["lr"] == 1e-3
    assert json.loads((folder / ".stale" / "0" / "config.json").read_text())["train"]["lr"] != 1e-3
    assert len(load_results(tmp_path)) == 1


def test_a_config_key_added_since_a_cell_ran_does_not_make_it_stale(tmp_path):
    """Upgrading the package adds keys; a finished cell whose stored config lacks one at its default
    is still this cell (not rerun); one lacking it at another value is stale."""
    from daca_bench.experiments.grid.executors import _set_aside_if_stale

    cell = expand({"overrides": QUICK, "axes": {"variant": ["baseline"]}})[0]
    folder = tmp_path / "cell"
    folder.mkdir()
    stored = json.loads(json.dumps(to_dict(cell.config)))
    del stored["train"]["eval_split"], stored["dps"]["norm"]  # keys a newer package added
    (folder / "config.json").write_text(json.dumps(stored))
    assert _set_aside_if_stale(folder, cell.config) is None
    assert _set_aside_if_stale(folder, apply(cell.config, {"train.eval_split": "dev"})).endswith(".stale/0")
