"""`tiny-compute` as data (issue 48): is DACA's credit worth its compute? grpo's baseline and +DACA
in the d1-like regime, each trained to the step count at which the baseline has spent the training
FLOPs of +DACA at 32 steps, evaluated on the way (train.eval_every), from two SFT starts. Nothing
here runs a cell.

    steps, ratio = cost.matched_steps(base_cfg, daca_cfg, 32)   # by the cost model (grid/cost.py), before any cell
    arms = compute_arms(picks, steps)                      # [(base, name, variant, keys, extra axes)]

The matched measure is FLOPs (forward and backward, every phase of training: rollouts, old and
reference passes, every SML stratum and inner update), predicted by `daca-bench cost` from the
configs and checked against the ledger within 5 % (tests/unit/grid/test_cost.py). With a constant learning
rate a cell's evaluation at step 32 is the 32-step run's final one (tests/unit/analysis/test_budgets.py), so each
cell runs once to the matched step count and gives two arms, "<variant>@32" and "<variant>@<matched>"
(axes.json `budgets`). The learning rates are fixed in advance: the committed readings picks, the
same for both budgets (not tuned per budget).
"""

from __future__ import annotations

import math

BASE_STEPS = 32
FLOPS_RATIO = 2.50  # +DACA over baseline training FLOPs per step, cost.matched_steps on tiny's arms (a test checks)
MATCHED_STEPS = 80  # round(32 x FLOPS_RATIO)
EVAL_EVERY = 16  # accuracy every 16 steps: the curves (32 and the matched budget are the arms)
MEASURE = "flops"
SFT_SEEDS = (0, 1)  # two SFT starts (sft.seed), every arm from each
SEEDS = tuple(range(40, 48))  # no committed table ran these (0-15, 16-23, 24-39, 100-103)
TEST = {"train.test_seed": 2, "train.test_exclude": "configs/scored/sudoku_tiny.after-full.txt", "train.n_eval": 256}


def base_of(steps: int) -> int:
    """The short budget of a run to STEPS: 32 at the matched 80 (a shorter trial run keeps the ratio)."""
    return max(1, round(steps * BASE_STEPS / MATCHED_STEPS))


def compute_arms(picks: dict, steps: int) -> list[tuple]:
    """grpo's baseline and +DACA with their committed readings, each run to STEPS, evaluated every
    EVAL_EVERY steps (or the short budget's divisor) and read at base_of(STEPS) and STEPS (its budgets)."""
    from .readings import overrides

    base = base_of(steps)
    keys = {"train.steps": steps, "train.eval_every": math.gcd(EVAL_EVERY, base)}
    return [("grpo", v, v, {**overrides(picks, v), **keys}, {"budgets": [base, steps]}) for v in ("baseline", "+DACA")]


def planned_comparisons(label: str, task: str, steps: int) -> dict:
    """design.json's comparisons (variant minus vs). Primary (Holm): +DACA@32 against the baseline at
    +DACA@32's FLOPs; +DACA against the baseline at the longer budget. Secondary (Holm): the headline
    at 32 steps, and what the longer budget adds to each arm."""
    row = lambda a, b: {"family": label, "task": task, "base": "grpo", "variant": a, "vs": f"grpo {b}"}  # noqa: E731
    short, long = f"@{base_of(steps)}", f"@{steps}"
    return {
        "primary": [row("+DACA" + short, "baseline" + long), row("+DACA" + long, "baseline" + long)],
        "secondary": [
            row("+DACA" + short, "baseline" + short),
            row("baseline" + long, "baseline" + short),
            row("+DACA" + long, "+DACA" + short),
        ],
    }


QUESTION = (
    "does grpo's baseline given +DACA's training FLOPs catch +DACA at 32 steps; does +DACA still lead "
    "when both train to that longer budget"
)
NOTES = (
    "Fixed before any cell ran. Measure: training FLOPs (torch.utils.flop_counter in every phase), predicted per "
    "step by `daca-bench cost` from the configs; the baseline's steps are round(32 x ratio). Arms read from one "
    "cell per (start, seed, variant) at step 32 and at the matched step (constant lr: the 32-step evaluation is "
    "the 32-step run's). Learning rates fixed in advance: the committed readings picks, the same at both "
    "budgets. Two SFT starts (sft.seed 0 and 1) x 8 RL seeds (40-47, run in no committed table); the start is "
    "a random effect of every interval. Test: 256 sudoku_tiny prompts drawn with test seed 2, skipping every "
    "prompt a committed table scored (configs/scored/sudoku_tiny.after-full.txt, tiny-full's draw included). "
    "Decision: Holm-adjusted p < 0.05 within the primary and within the secondary family."
)


# ---- tiny-compute-starts (issue 58): the same question over 16 fresh SFT starts -----------------
# tiny-compute's two starts carry one df for the start term (MDE 55-75 pp): its nulls say nothing.
# Here 20 SFT starts x 2 RL seeds each, the baseline to the matched budget and +DACA to 32 steps only
# (both evaluated every 16 steps: the accuracy-vs-FLOPs curves cover the same FLOPs), sized by
# power.py on the variance components of tiny-compute's committed cells (a different run).
STARTS_SFT_SEEDS = tuple(range(2, 22))  # sft.seed: every committed run used 0 (tiny-compute also 1)
SEEDS_PER_START = 2
STARTS_SEEDS = tuple(range(48, 48 + SEEDS_PER_START * len(STARTS_SFT_SEEDS)))  # 48-87: two per start, none committed
STARTS_TEST = {
    "train.test_seed": 3,
    "train.test_exclude": "configs/scored/sudoku_tiny.after-compute.txt",
    "train.n_eval": 256,
}
COMPONENTS_FROM = "results/tiny-compute"
SENSITIVITY_START_SD = 6.0  # pp: above the 3.3-5.6 the committed cells give the start x arm term


# a cell's wall seconds at 32 steps on a 2-core AMD EPYC (BENCHMARKS.md, `reproduce` the default and
# tiny-ablation: baseline 52-58 s, +DACA 127-135 s); a step's seconds scale with its FLOPs per arm
SECONDS_AT_32 = {"baseline": (52, 58), "+DACA": (127, 135)}


def cpu_estimate(cells: list, workers: int = 2) -> dict:
    """design.json's CPU estimate of CELLS (ablation.Cell): per cell SECONDS_AT_32 x steps / 32, summed,
    and the wall-clock with WORKERS cells at a time (2 on 2 cores), SFT apart."""
    lo = hi = 0.0
    for c in cells:
        a, b = SECONDS_AT_32[c.axes["variant"]]
        lo, hi = lo + a * c.config.train.steps / BASE_STEPS, hi + b * c.config.train.steps / BASE_STEPS
    return {
        "cells": len(cells),
        "cell_seconds": [round(lo), round(hi)],
        "wall_minutes_2_cores": [round(lo / workers / 60), round(hi / workers / 60)],
        "basis": "SECONDS_AT_32 (BENCHMARKS.md: a 2-core AMD EPYC, 52-58 s baseline, 127-135 s +DACA at 32 steps) "
        "x steps / 32 per cell, two cells at a time; plus one SFT per start (about half a minute each)",
    }


def starts_arms(picks: dict, steps: int) -> list[tuple]:
    """The baseline to STEPS (read at base_of(STEPS) and STEPS) and +DACA to base_of(STEPS) only, both
    evaluated every EVAL_EVERY steps: +DACA@32 spends the baseline@80's training FLOPs."""
    from .readings import overrides

    base = base_of(steps)
    every = math.gcd(EVAL_EVERY, base)
    return [
        (
            "grpo",
            "baseline",
            "baseline",
            {**overrides(picks, "baseline"), "train.steps": steps, "train.eval_every": every},
            {"budgets": [base, steps], "compute_ratio": FLOPS_RATIO, "base_steps": base},
        ),
        (
            "grpo",
            "+DACA",
            "+DACA",
            {**overrides(picks, "+DACA"), "train.steps": base, "train.eval_every": every},
            {"budgets": [base]},
        ),
    ]


def starts_comparisons(label: str, task: str, steps: int) -> dict:
    """Primary: +DACA@32 against the baseline at its FLOPs (FLOP-matched). Secondary: +DACA@32 against
    the baseline@32 (sample-matched: the same prompts x completions), and what the longer budget adds
    to the baseline."""
    row = lambda a, b: {"family": label, "task": task, "base": "grpo", "variant": a, "vs": f"grpo {b}"}  # noqa: E731
    short, long = f"@{base_of(steps)}", f"@{steps}"
    return {
        "primary": [row("+DACA" + short, "baseline" + long)],
        "secondary": [row("+DACA" + short, "baseline" + short), row("baseline" + long, "baseline" + short)],
    }


def seeds_by_start(sft_seeds, seeds, arms: str) -> dict:
    """sft.seed -> the RL seeds of its cells: every seed from each start (tiny-compute), or for
    `compute-starts` its own consecutive block of len(seeds) / starts (no seed shared across starts)."""
    seeds = tuple(seeds)
    if arms != "compute-starts":
        return {k: seeds for k in sft_seeds}
    per, left = divmod(len(seeds), len(sft_seeds))
    if left or not per:
        raise ValueError(f"{len(seeds)} seeds do not split evenly over {len(sft_seeds)} SFT starts")
    return {k: seeds[i * per : (i + 1) * per] for i, k in enumerate(sft_seeds)}


def test_clusters(task: str, rl: dict) -> int:
    """The clusters (sudoku: solution grids) of the test set a family's RL keys draw."""
    from ...registry import draw_test, task_spec

    spec = task_spec(task)
    drawn = draw_test(
        task,
        rl.get("train.eval_split", "test"),
        rl["train.n_eval"],
        rl["train.test_seed"],
        rl.get("train.test_exclude", ""),
    ).samples
    return len({spec.cluster_of(s) for s in drawn}) if spec.cluster else len(drawn)


def assumed_power(root, label: str, task: str, steps: int, starts: int, per_start: int, clusters: int) -> dict:
    """design.json's power analysis: each planned comparison's variance components estimated on the
    committed COMPONENTS_FROM cells (their own two starts), and the MDE of this design under them
    (analysis/power.py), with a sensitivity row at a start x arm sd of SENSITIVITY_START_SD pp."""
    from ..analysis.power import power_block, start_components, start_mde
    from ..analysis.results import _pair, cluster_maps, load_results
    from ..analysis.stats import by_cluster

    df = load_results(f"{root}/{COMPONENTS_FROM}/cells")
    keys = cluster_maps(df)[task]
    comps = {}
    for fam, rows in starts_comparisons(label, task, steps).items():
        for c in rows:
            d, ids, groups = _pair(df[df["variant"] == c["variant"]], df[df["variant"] == c["vs"].split()[1]])
            comps[f"{c['variant']} vs {c['vs']} ({fam})"] = start_components(
                by_cluster(d, [keys[i] for i in ids]), groups
            )
    block = power_block(
        comps,
        starts,
        per_start,
        clusters,
        f"{COMPONENTS_FROM}/cells (2 SFT starts x 8 seeds; the start term's estimate rests on one df)",
    )
    s2 = SENSITIVITY_START_SD**2
    block["sensitivity"] = {
        "start_sd_pp": SENSITIVITY_START_SD,
        "mde_pp": {
            k: round(start_mde((max(v[0], s2), *v[1:]), starts, per_start, clusters), 2) for k, v in comps.items()
        },
    }
    block["max_primary_mde_pp"] = max(r["mde_pp"] for k, r in block["mde"].items() if k.endswith("(primary)"))
    return block


STARTS_QUESTION = (
    "does +DACA at 32 steps beat grpo's baseline given the same training FLOPs (80 steps), and given "
    "the same samples (32 steps), over SFT starts (a random effect of 20 fresh starts)"
)
STARTS_NOTES = (
    "Fixed before any cell ran (issue 58). Question: does +DACA beat grpo's baseline at equal training FLOPs "
    "(primary: +DACA@32 against baseline@80, the cost model's 2.50x) and at equal samples (secondary: "
    "+DACA@32 against baseline@32), with intervals that generalise over SFT starts. 20 SFT starts (sft.seed "
    "2-21, none used by a committed run) x 2 RL seeds each (48-87, none committed; no seed shared across "
    "starts); the start is a random effect always in the model (analysis/power.py, df at most 19). The "
    "baseline runs to 80 steps, +DACA to 32, both evaluated every 16 steps (accuracy-vs-FLOPs curves over "
    "the same FLOPs). Learning rates: the committed readings picks. Test: 256 sudoku_tiny prompts drawn "
    "with test seed 3, skipping every prompt a committed table scored (configs/scored/sudoku_tiny."
    "after-compute.txt: tiny-full's and tiny-compute's draws included). Power: the design's `power` block, "
    "variance components from results/tiny-compute's cells. Decision: Holm-adjusted p < 0.05 within the "
    "primary and within the secondary family."
)
