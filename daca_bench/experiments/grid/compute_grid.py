"""`tiny-compute` as data (issue 48): is DACA's credit worth its compute? grpo's baseline and +DACA
in the d1-like regime, each trained to the step count at which the baseline has spent the training
FLOPs of +DACA at 32 steps, evaluated on the way (train.eval_every), from two SFT starts. Nothing
here runs a cell.

    steps, ratio = cost.matched_steps(base_cfg, daca_cfg, 32)   # by the cost model (grid/cost.py), before any cell
    arms = compute_arms(picks, steps)                      # [(base, name, variant, keys, extra axes)]

The matched measure is FLOPs (forward and backward, every phase of training: rollouts, old and
reference passes, every SML stratum and inner update), predicted by `daca-bench cost` from the
configs and checked against the ledger within 5 % (tests/test_cost.py). With a constant learning
rate a cell's evaluation at step 32 is the 32-step run's final one (tests/test_budgets.py), so each
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
    return {"primary": [row("+DACA" + short, "baseline" + long), row("+DACA" + long, "baseline" + long)],
            "secondary": [row("+DACA" + short, "baseline" + short), row("baseline" + long, "baseline" + short),
                          row("+DACA" + long, "+DACA" + short)]}


QUESTION = ("does grpo's baseline given +DACA's training FLOPs catch +DACA at 32 steps; does +DACA still lead "
            "when both train to that longer budget")
NOTES = ("Fixed before any cell ran. Measure: training FLOPs (torch.utils.flop_counter in every phase), predicted per "
         "step by `daca-bench cost` from the configs; the baseline's steps are round(32 x ratio). Arms read from one "
         "cell per (start, seed, variant) at step 32 and at the matched step (constant lr: the 32-step evaluation is "
         "the 32-step run's). Learning rates fixed in advance: the committed readings picks, the same at both "
         "budgets. Two SFT starts (sft.seed 0 and 1) x 8 RL seeds (40-47, run in no committed table); the start is "
         "a random effect of every interval. Test: 256 sudoku_tiny prompts drawn with test seed 2, skipping every "
         "prompt a committed table scored (configs/scored/sudoku_tiny.after-full.txt, tiny-full's draw included). "
         "Decision: Holm-adjusted p < 0.05 within the primary and within the secondary family.")
