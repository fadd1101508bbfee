"""Issue 48, the pre-registered compute experiment (`tiny-compute`): its step count is the cost
model's, its seeds and test prompts are fresh, its arms are read at two budgets from one cell, and
its intervals carry the SFT start as a random effect (tested on synthetic data first)."""

import json
from pathlib import Path

import numpy as np
import pytest

from daca_bench.experiments.analysis.budgets import by_start
from daca_bench.experiments.analysis.cellstore import cells, is_run
from daca_bench.experiments.analysis.render import to_markdown
from daca_bench.experiments.analysis.results import build_table, load_results
from daca_bench.experiments.analysis.stats import compare
from daca_bench.experiments.grid import compute_grid
from daca_bench.experiments.grid.cost import arms, matched_steps
from daca_bench.experiments.grid.pipeline import tiny_cells
from daca_bench.experiments.grid.presets import PRESETS, comparisons
from daca_bench.registry import draw_test, prompt_digest

from repo_paths import ROOT

PRESET = PRESETS["tiny-compute"]


def test_the_matched_step_count_is_the_cost_models():
    got = {v: c for _, v, c in arms("tiny", None)}
    steps, ratio = matched_steps(got["baseline"], got["+DACA"])
    assert steps == compute_grid.MATCHED_STEPS == PRESET.rl_steps and ratio == pytest.approx(
        compute_grid.FLOPS_RATIO, abs=0.005
    )


def test_a_design_matches_by_the_measure_it_declares():
    got = {v: c for _, v, c in arms("tiny", None)}
    assert matched_steps(got["baseline"], got["+DACA"], measure="samples") == (32, 1.0)  # same prompts x G per step
    steps, ratio = matched_steps(got["baseline"], got["+DACA"], measure="seconds", cells="results/tiny-ablation/cells")
    assert ratio > 1 and steps == round(32 * ratio)  # tiny-bases' measure: the committed cells' training seconds
    with pytest.raises(Exception, match="compute measure"):
        matched_steps(got["baseline"], got["+DACA"], measure="tokens")


def test_every_arm_runs_from_each_start_to_the_matched_budget_and_is_read_at_both():
    cells = tiny_cells(PRESET, {"sudoku#0": {"folder": "a"}, "sudoku#1": {"folder": "b"}})
    assert len(cells) == 2 * 8 * 2 and len({c.name for c in cells}) == 32
    for c in cells:
        t = c.config.train
        assert (t.steps, t.eval_every, c.axes["budgets"]) == (80, 16, [32, 80])
        assert t.init == ("a" if c.axes["sft_start"] == 0 else "b") + "/final"
    tiny = {c.axes["variant"]: c.config for c in tiny_cells(PRESETS["tiny"], {"sudoku": {"folder": "a"}})}
    for c in cells:  # the headline's readings and regime, the longer budget and the fresh test set aside
        ref = tiny[c.axes["variant"]]
        assert (c.config.dps, c.config.sml, c.config.loss, c.config.rollout) == (
            ref.dps,
            ref.sml,
            ref.loss,
            ref.rollout,
        )
        assert (c.config.train.lr, c.config.train.mu) == (ref.train.lr, ref.train.mu)
    plan = comparisons(PRESET)
    assert [(r["variant"], r["vs"]) for r in plan["primary"]] == [
        ("+DACA@32", "grpo baseline@80"),
        ("+DACA@80", "grpo baseline@80"),
    ]


def test_seeds_and_test_prompts_are_fresh_against_every_committed_table(committed_seeds):
    assert not set(PRESET.seeds) & committed_seeds(skip="tiny-compute")
    fam = PRESET.families["sudoku"]
    t = tiny_cells(PRESET, {"sudoku": {"folder": "a"}})[0].config.train
    mine = {prompt_digest(s.prompt) for s in draw_test(fam.task, "test", t.n_eval, t.test_seed, t.test_exclude).samples}
    assert len(mine) == 256
    full = PRESETS["tiny-full"].families["sudoku"].rl  # tiny-full's own fresh draw
    theirs = draw_test(fam.task, "test", full["train.n_eval"], full["train.test_seed"], full["train.test_exclude"])
    assert not mine & {prompt_digest(s.prompt) for s in theirs.samples}
    root = ROOT
    scored = set()
    for run in (p for p in sorted((root / "results").iterdir()) if is_run(p)):  # every committed cell's prompts
        for cell in (c for c in cells(run / "cells") if c.has("eval.jsonl")):  # of this task, by id
            if run.name not in ("tiny-full", "tiny-compute"):
                scored |= {r["id"] for r in cell.rows("eval.jsonl") if r["id"].startswith("sudoku")}
    seed0 = {s.id: prompt_digest(s.prompt) for s in draw_test(fam.task, "test", 4096, 0).samples}
    assert scored and not mine & {seed0[i] for i in scored if i in seed0}


def _units(rng, T, n, P, start_sd, seed_sd, effect):
    """A (T*n, P) matrix of paired 0/1-outcome differences in pp: a start effect on the difference."""
    starts = np.repeat(np.arange(T), n)
    shift = rng.normal(0, start_sd, T)[starts] + rng.normal(0, seed_sd, T * n) + effect
    p = np.clip(0.4 + shift[:, None] / 100 + rng.normal(0, 0.1, P)[None, :], 0, 1)
    a = rng.random((T * n, P)) < p
    b = rng.random((T * n, P)) < np.clip(0.4 + rng.normal(0, 0.1, P), 0, 1)[None, :]
    return 100.0 * (a.astype(float) - b), starts


def test_the_start_term_keeps_the_null_rate_where_ignoring_starts_does_not():
    rng = np.random.default_rng(0)
    hits_start = hits_plain = 0
    for _ in range(300):
        d, starts = _units(rng, T=2, n=8, P=60, start_sd=6.0, seed_sd=1.0, effect=0.0)
        hits_start += by_start(d, starts, n_boot=10).p < 0.05
        hits_plain += compare(d, n_boot=10).p < 0.05
    # 2 starts, a large start term: ignoring it rejects a true null about 18 % of the time; with the
    # start term always in (one df), at most 5 % (tests/unit/analysis/test_power.py: the same at 8 starts)
    assert hits_start / 300 <= 0.06 and hits_plain >= 2 * hits_start


def test_two_starts_cannot_find_what_eight_starts_of_the_same_units_find():
    """Issue 58: the start term is always in (no pretest), so 2 starts carry one df and cannot find a
    planted +12 pp; the same 16 units spread over 8 starts find it nearly always."""
    rng = np.random.default_rng(1)
    found = {2: 0, 8: 0}
    for _ in range(100):
        for T in found:
            d, starts = _units(rng, T=T, n=16 // T, P=200, start_sd=0.0, seed_sd=1.0, effect=12.0)
            found[T] += by_start(d, starts, n_boot=10).p < 0.05
    assert found[8] >= 90 and found[2] <= 60


def _cell(root: Path, variant: str, start: int, seed: int, acc: dict, flops: float):
    """A finished budget cell as the trainer leaves one (a unit-test double; tests/unit/analysis/test_budgets.py
    checks the trainer writes these files)."""
    cell = root / f"v={variant}_s={start}_seed={seed}"
    cell.mkdir(parents=True)
    ids = [f"sudoku_tiny/{i}" for i in range(20)]
    for step in acc:
        name = "eval.jsonl" if step == 4 else f"eval-step{step}.jsonl"
        (cell / name).write_text(
            "".join(
                json.dumps({"id": i, "reward": float(k < acc[step]), "status": "ok"}) + "\n" for k, i in enumerate(ids)
            )
        )
    rows = [
        {
            "step": s,
            "flops_rollout": flops,
            "flops_likelihood_old": 0,
            "flops_likelihood": flops,
            "completions": 8,
            **({"test_accuracy": acc[2] / 20, "eval_prompts": 20, "flops_eval": 1.0} if s == 2 else {}),
        }
        for s in (1, 2, 3, 4)
    ]
    (cell / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ledger = {
        "phases": {p: {"flops": 0, "passes": 0, "tokens": 0, "seconds": 1.0} for p in ("rollout", "eval")},
        "flops_train": 8 * flops,
        "completions": 32,
        "reward_calls": 72,
    }
    (cell / "summary.json").write_text(
        json.dumps(
            {
                "test_accuracy": acc[4] / 20,
                "steps": 4,
                "ledger": ledger,
                "task_record": {"family": "sudoku", "cluster": None},
            }
        )
    )
    (cell / "axes.json").write_text(json.dumps({"variant": variant, "sft_start": start, "budgets": [2, 4]}))
    cfg = {
        "train": {"task": "sudoku_tiny", "seed": seed, "lr": 1e-4, "steps": 4},
        "loss": {"base": "grpo"},
        "sml": {"k": 1},
        "dps": {"enabled": False},
    }
    (cell / "config.json").write_text(json.dumps(cfg))


def test_a_budget_cell_is_one_row_per_budget_with_its_ledger_and_pairs_by_start_and_seed(tmp_path):
    for start in (0, 1):
        for seed in (40, 41, 42):
            _cell(tmp_path, "baseline", start, seed, {2: 5, 4: 8 + seed % 2}, 10.0)
            _cell(tmp_path, "+DACA", start, seed, {2: 9 + start, 4: 11}, 25.0)
    df = load_results(tmp_path)
    assert sorted(df["variant"].unique()) == ["+DACA@2", "+DACA@4", "baseline@2", "baseline@4"]
    assert len(df) == 24 and set(df["start"]) == {0, 1}
    planned = {"primary": [{"base": "grpo", "variant": "+DACA@2", "vs": "grpo baseline@4"}], "secondary": []}
    table = build_table(df, {}, planned)
    row = table[(table["variant"] == "+DACA@2") & (table["vs"] == "grpo baseline@4")].iloc[0]
    assert row["delta_pp"] == pytest.approx(100 * (9.5 - 25 / 3) / 20) and row["plan"] == "primary"
    arms_ = table.drop_duplicates("variant").set_index("variant")
    assert arms_.loc["baseline@4", "flops_train"] == 80 and arms_.loc["+DACA@2", "flops_train"] == 100
    assert arms_.loc["baseline@2", "completions"] == 16 and arms_.loc["baseline@4", "completions"] == 32
    md = to_markdown(table)
    assert "compute per arm" in md and "SFT starts: 2 (axes.json sft_start)" in md and "(2 SFT starts x 3 seeds)" in md


# ---- tiny-compute-starts (issue 58) ------------------------------------------------------------
STARTS = PRESETS["tiny-compute-starts"]


def _starts_cells():
    return tiny_cells(STARTS, {f"sudoku#{k}": {"folder": f"s{k}"} for k in STARTS.sft_seeds})


def test_the_starts_design_has_fresh_starts_seeds_and_prompts(committed_seeds):
    cells = _starts_cells()
    assert len(STARTS.sft_seeds) >= 8 and not {0, 1} & set(STARTS.sft_seeds)  # sft.seed 0 and 1: every committed run
    assert not set(STARTS.seeds) & committed_seeds(skip="tiny-compute-starts")
    units = {(c.axes["sft_start"], c.config.train.seed) for c in cells}
    assert len(units) == len(STARTS.seeds)  # no RL seed shared across starts
    by = {(c.axes["variant"]): (c.config.train.steps, c.config.train.eval_every, c.axes["budgets"]) for c in cells}
    assert by == {"baseline": (80, 16, [32, 80]), "+DACA": (32, 16, [32])}
    t = cells[0].config.train
    mine = {
        prompt_digest(s.prompt) for s in draw_test("sudoku_tiny", "test", t.n_eval, t.test_seed, t.test_exclude).samples
    }
    c = compute_grid.TEST  # tiny-compute's own fresh draw
    theirs = draw_test("sudoku_tiny", "test", c["train.n_eval"], c["train.test_seed"], c["train.test_exclude"])
    assert len(mine) == 256 and not mine & {prompt_digest(s.prompt) for s in theirs.samples}
    plan = comparisons(STARTS)
    assert [(r["variant"], r["vs"]) for r in plan["primary"]] == [("+DACA@32", "grpo baseline@80")]  # FLOP-matched
    assert ("+DACA@32", "grpo baseline@32") in [(r["variant"], r["vs"]) for r in plan["secondary"]]  # sample-matched


def test_the_starts_design_carries_a_power_analysis_with_every_primary_mde_at_most_5pp():
    from daca_bench.experiments.analysis.design import starts_warning, validate
    from daca_bench.experiments.grid.preregister import design_of

    design = validate(design_of("tiny-compute-starts", STARTS, _starts_cells(), commit="abc"))
    power = design["power"]
    assert power["starts"] == len(STARTS.sft_seeds) and power["components_from"].startswith("results/tiny-compute")
    primary = {k: v for k, v in power["mde"].items() if k.endswith("(primary)")}
    assert primary and all(v["mde_pp"] <= 5 for v in primary.values()) and power["max_primary_mde_pp"] <= 5
    assert design["cpu"]["cells"] == 80 and not starts_warning(design)
    # the same analysis at tiny-compute's 2 starts x 8 seeds: an MDE of tens of points, and a one-line warning
    from daca_bench.experiments.analysis.power import start_mde

    v = primary["+DACA@32 vs grpo baseline@80 (primary)"]
    assert start_mde((v["s2_start"], v["s2_seed"], v["s2_prompt"], v["s2_e"]), 2, 8, 68) > 30
    warn = starts_warning({**design, "compute": {**design["compute"], "sft_starts": [0, 1]}})
    assert warn.startswith("warning:") and "\n" not in warn and "2 of them" in warn
