"""`tiny-bases` as data: DACA on every base and against the field's methods, with a baseline given
+DACA's training compute (docs/method.md, section 11; issue #35). Nothing here runs a cell.

    arms = confirmatory_arms(PICKS, ratio)    # [(base, name, variant, keys, extra axes)], for tiny_cells
    steps = compute_matched_steps(32, ratio)  # the compute-matched baseline's RL steps
    ratio = measured_cost_ratio("results/tiny/cells")  # +DACA / baseline training seconds per step

BASE_VARIANTS says which of baseline / +DPS / +SML / +DACA each base admits (a variant a base
does not admit is absent, never faked: rl.bases.check refuses it); BASE_KEYS holds each base's
own keys over the d1-like regime; TINY_BASES_DESIGN is the pre-registration (families, seeds,
splits, the lr grid, the primary and secondary comparisons, alpha, Holm), to be written into the
results folder before the first confirmatory cell.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

FOUR = ("baseline", "+DPS", "+SML", "+DACA")
PAPER_BASES = ("grpo", "gspo", "reinforce_pp")
FIELD_BASES = ("wd1", "spg", "espo", "coupled_grpo", "map")
DPS_ONLY = ("baseline", "+DPS")  # the base defines its own likelihood: SML does not apply
BASE_VARIANTS = {**{b: FOUR for b in PAPER_BASES}, "wd1": FOUR, **{b: DPS_ONLY for b in FIELD_BASES[1:]}}
# the row the primary family tests against each base's baseline: its fullest DACA
DACA_ROW = {b: "+DACA" if "+DACA" in v else "+DPS" for b, v in BASE_VARIANTS.items()}

# each base's own keys over the regime (loss.beta 0.04, eps 0.2, mu 2, prompt mask 0.15): the
# methods without a KL term run without one; ESPO's k2 KL on the sequence ELBO takes its sudoku
# recipe's beta; the rest keep the regime's
BASE_KEYS = {
    "grpo": {}, "gspo": {}, "reinforce_pp": {}, "coupled_grpo": {},
    "wd1": {"loss.beta": 0.0},
    "spg": {"loss.beta": 0.0, "loss.spg_mode": "mix", "loss.spg_mix": 0.5, "loss.spg_beta": 1.0},
    "espo": {"loss.beta": 0.01},
    "map": {"loss.beta": 0.0, "loss.map_blocks": 4},
}

COMPUTE_MATCHED = "baseline@+DACA-compute"
PHASES = ("rollout", "verify", "credit", "likelihood_old", "update")


def measured_cost_ratio(cells: str | Path, base: str = "grpo", task: str = "sudoku_tiny") -> float:
    """+DACA's training seconds per step over the baseline's (the step's phases, no evaluation or
    loading), mean over the cells of each: the compute-matched baseline's step multiplier."""
    def per_step(variant):
        out = []
        for f in sorted(Path(cells).glob(f"base={base}_task={task}_variant={variant}_seed=*/metrics.jsonl")):
            rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
            out.append(sum(r.get(f"seconds_{p}", 0.0) for r in rows for p in PHASES) / max(1, len(rows)))
        if not out:
            raise ValueError(f"no {base} {variant} cells on {task} under {cells}")
        return statistics.mean(out)

    return per_step("+DACA") / per_step("baseline")


def compute_matched_steps(base_steps: int, ratio: float) -> int:
    """The baseline's RL steps at +DACA's training compute: the same schedule (constant lr, no
    decay to stretch), `ratio` times as many steps, never fewer than the base's."""
    if ratio <= 0:
        raise ValueError(f"the cost ratio must be positive, got {ratio}")
    return max(base_steps, round(base_steps * ratio))


def compute_matched_arm(base_steps: int, ratio: float, picks: dict) -> tuple:
    """grpo's baseline at +DACA's compute: (base, name, variant, keys, extra axes); the ratio and
    the step count go into the cell's axes.json beside its config."""
    steps = compute_matched_steps(base_steps, ratio)
    keys = {**_lr_keys(picks, "grpo", "baseline"), "train.steps": steps}
    return ("grpo", COMPUTE_MATCHED, "baseline", keys, {"compute_ratio": round(ratio, 4), "base_steps": base_steps})


def _lr_keys(picks: dict, base: str, variant: str) -> dict:
    """A (base, variant)'s keys: the committed reading of the variant (picks[variant]: DPS score, SML
    partition, lr), overridden by the sweep's pick for the base (picks[base][variant], or for an
    unswept row the pick it inherits, INHERITS)."""
    shared = {k: v for k, v in picks.get(variant, {}).items() if k != "reading"}
    own = picks.get(base) if isinstance(picks.get(base), dict) else {}
    row = own.get(variant) or own.get(INHERITS.get(variant, ""), {})
    return {**shared, **{k: v for k, v in row.items() if k != "reading"}}


def base_arms(base: str, picks: dict) -> list[tuple]:
    """Every variant `base` admits, each with the base's keys and its picked keys."""
    return [(base, v, v, {"loss.base": base, **BASE_KEYS[base], **_lr_keys(picks, base, v)}, {})
            for v in BASE_VARIANTS[base]]


def confirmatory_arms(picks: dict, ratio: float, base_steps: int = 32) -> list[tuple]:
    arms = [a for b in (*PAPER_BASES, *FIELD_BASES) for a in base_arms(b, picks)]
    return arms + [compute_matched_arm(base_steps, ratio, picks)]


SWEPT = ("baseline", "daca")  # the rows the sweep tunes per base: its baseline and its DACA row (DACA_ROW)
INHERITS = {"+DPS": "baseline", "+SML": "+DACA"}  # an unswept row's lr: +DPS the baseline's, +SML +DACA's


def selection_arms(design: dict | None = None) -> list[tuple]:
    """The lr sweep on the dev split: each base's baseline and DACA row at every lr of the grid
    (SPG's at each value of its tuned keys too), on the selection seeds."""
    d = design or TINY_BASES_DESIGN
    arms = []
    for base in (*PAPER_BASES, *FIELD_BASES):
        tuned = d["tuned"].get(base, {})
        extra_axes = [{}] + [{k: v} for k, vals in tuned.items() for v in vals[1:]]
        for v in ("baseline", DACA_ROW[base]):
            for lr in d["lr_grid"]:
                for extra in extra_axes:
                    label = "@".join([v, f"{lr:g}", *(f"{k.split('.')[-1]}={x}" for k, x in extra.items())])
                    arms.append((base, label, v, {"loss.base": base, **BASE_KEYS[base], "train.lr": lr, **extra},
                                 {"variant_of": v, "train.lr": lr, **extra}))
    return arms


TINY_BASES_DESIGN = {
    "preset": "tiny-bases",
    "question": "does DACA help on every base; where does each field method's baseline stand against grpo's and "
                "grpo +DACA's; does grpo's baseline at +DACA's training compute catch +DACA",
    "family": "sudoku",  # sudoku_tiny, FIVE['sudoku']: canvas 18, 9 steps, dense training reward, 32 RL steps
    "task": "sudoku_tiny",
    "regime": "the d1-like regime of the tiny presets (mu 2, prompt mask 0.15, beta 0.04, eps 0.2) with BASE_KEYS",
    "readings": "the committed tiny-readings picks: DPS progress/rank, SML causal K = 4",
    "steps": 32,
    "bases": list(PAPER_BASES + FIELD_BASES),
    "variants": {b: list(v) for b, v in BASE_VARIANTS.items()},
    "compute_matched": {"base": "grpo", "variant": "baseline", "steps": "compute_matched_steps(32, ratio)",
                        "ratio": "measured_cost_ratio(results/tiny/cells): +DACA over baseline training seconds "
                                 "per step on the committed confirmatory cells, fixed before the run"},
    # seeds 0-15 and 100-101 ran in committed tables (results/*/cells); these never did
    "confirmatory_seeds": list(range(16, 24)),
    "selection_seeds": [102, 103],
    "selection_split": "dev",  # disjoint from test (tests/test_regime.py)
    "test": {"split": "test", "test_seed": 0, "n_eval": 256},  # the shared test set of the committed tables
    # every pick so far landed on the top of a two-point grid (5e-5, 1e-4): one value above it
    "lr_grid": [5e-5, 1e-4, 2e-4],
    # the mixture coefficient: SPG's maintainers mitigate eubo's collapse with mix; w = 0.25 leans further on the ELBO
    "tuned": {"spg": {"loss.spg_mix": [0.5, 0.25]}},
    "swept_rows": "per base: its baseline and its DACA row (+DACA, or +DPS where SML does not apply)",
    "rule": "per (base, swept row): the lr (and tuned value) with the highest mean dev accuracy over the selection "
            "seeds; ties to the smaller lr, then the first listed value. Unswept rows: +DPS takes the baseline's "
            "pick, +SML the +DACA row's (SML changes the likelihood whose gradient the lr scales). Fixed before the "
            "sweep runs.",
    "primary": [{"base": b, "row": DACA_ROW[b], "against": f"{b} baseline"} for b in (*PAPER_BASES, *FIELD_BASES)],
    "secondary": (
        [{"base": b, "row": v, "against": f"{b} baseline"} for b in (*PAPER_BASES, *FIELD_BASES)
         for v in BASE_VARIANTS[b] if v not in ("baseline", DACA_ROW[b])]
        + [{"base": b, "row": "baseline", "against": "grpo baseline"} for b in (*PAPER_BASES[1:], *FIELD_BASES)]
        + [{"base": b, "row": "baseline", "against": "grpo +DACA"} for b in (*PAPER_BASES[1:], *FIELD_BASES)]
        + [{"base": "grpo", "row": COMPUTE_MATCHED, "against": "grpo +DACA"},
           {"base": "grpo", "row": COMPUTE_MATCHED, "against": "grpo baseline"}]),
    "alpha": 0.05,
    "multiplicity": "holm within the primary family and within the secondary family "
                    "(statsmodels.stats.multitest.multipletests)",
    "guards": "spg: a non-finite bound stops the cell (loss.spg_mode=mix; loss.spg_floor=-20)",
}
