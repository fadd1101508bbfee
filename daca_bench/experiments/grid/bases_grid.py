"""`tiny-bases` as data: DACA on every base and against the field's methods, with a baseline given
+DACA's training compute (docs/method.md, section 11; issue #35). Nothing here runs a cell.

    arms = confirmatory_arms(PICKS, ratio)    # [(base, name, variant, keys, extra axes)], for tiny_cells
    steps = compute_matched_steps(32, ratio)  # the compute-matched baseline's RL steps
    ratio = measured_cost_ratio("results/tiny-ablation/cells")  # +DACA / baseline training seconds per step
    arms = selection_arms(TINY_BASES_DESIGN, PICKS)  # the lr sweep on dev, before any confirmatory cell
    picks = write_picks(sweep_cells, out)["picks"]   # the design's rule -> out/picks.json

BASE_VARIANTS says which of baseline / +DPS / +SML / +DACA each base admits (a variant a base
does not admit is absent, never faked: rl.bases.check refuses it); BASE_KEYS holds each base's
own keys over the d1-like regime; TINY_BASES_DESIGN is the pre-registration (families, seeds,
splits, the lr grid, the primary and secondary comparisons, alpha, Holm), to be written into the
results folder before the first confirmatory cell; planned_comparisons is that family as
design.json holds it. `daca-bench reproduce --preset tiny-bases` runs it (experiments/grid/pipeline.py).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from ..analysis import cellstore

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
    "grpo": {},
    "gspo": {},
    "reinforce_pp": {},
    "coupled_grpo": {},
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
        prefix = f"base={base}_task={task}_variant={variant}_seed="
        for cell in (c for c in cellstore.cells(cells) if c.name.startswith(prefix) and c.has("metrics.jsonl")):
            rows = cell.rows("metrics.jsonl")
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
    keys = {"loss.base": "grpo", **BASE_KEYS["grpo"], **_lr_keys(picks, "grpo", "baseline"), "train.steps": steps}
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
    return [
        (base, v, v, {"loss.base": base, **BASE_KEYS[base], **_lr_keys(picks, base, v)}, {})
        for v in BASE_VARIANTS[base]
    ]


def confirmatory_arms(picks: dict, ratio: float, base_steps: int = 32, bases=None) -> list[tuple]:
    """Every base's arms (BASES: a subset, in this order) and, with grpo, its compute-matched baseline."""
    bases = list(bases or (*PAPER_BASES, *FIELD_BASES))
    arms = [a for b in bases for a in base_arms(b, picks)]
    return arms + ([compute_matched_arm(base_steps, ratio, picks)] if "grpo" in bases else [])


SWEPT = ("baseline", "daca")  # the rows the sweep tunes per base: its baseline and its DACA row (DACA_ROW)
INHERITS = {"+DPS": "baseline", "+SML": "+DACA"}  # an unswept row's lr: +DPS the baseline's, +SML +DACA's


def selection_arms(
    design: dict | None = None, picks: dict | None = None, bases=None, beyond: dict | None = None
) -> list[tuple]:
    """The lr sweep on the dev split: each base's baseline and DACA row at every lr of the grid
    (SPG's at each value of its tuned keys too), on the selection seeds; each row with the committed
    reading of its variant (picks[variant]: DPS score, SML partition; its lr is the sweep's). With
    `beyond` ({(base, row): lr}, edge_extensions): only those rows, at that one lr past the grid."""
    d = design or TINY_BASES_DESIGN
    arms = []
    for base in bases or (*PAPER_BASES, *FIELD_BASES):
        tuned = d["tuned"].get(base, {})
        extra_axes = [{}] + [{k: v} for k, vals in tuned.items() for v in vals[1:]]
        for v in ("baseline", DACA_ROW[base]):
            if beyond is not None and (base, v) not in beyond:
                continue
            reading = {k: x for k, x in (picks or {}).get(v, {}).items() if k not in ("reading", "train.lr")}
            for lr in [beyond[(base, v)]] if beyond is not None else d["lr_grid"]:
                for extra in extra_axes:
                    label = "@".join([v, f"{lr:g}", *(f"{k.split('.')[-1]}={x}" for k, x in extra.items())])
                    arms.append(
                        (
                            base,
                            label,
                            v,
                            {"loss.base": base, **BASE_KEYS[base], **reading, "train.lr": lr, **extra},
                            {"variant_of": v, "train.lr": lr, **extra},
                        )
                    )
    return arms


def pick_bases(acc: dict[tuple, float], design: dict | None = None) -> dict:
    """(base, swept row, lr, tuned items) -> mean dev accuracy over the selection seeds  ->  each
    base's picks {base: {row: {"train.lr": lr, **tuned}}}, by the design's rule: the highest mean,
    ties to the smaller lr, then to the first listed tuned value (the base's default: no items)."""
    d = design or TINY_BASES_DESIGN
    out: dict = {}
    for base, row in sorted({k[:2] for k in acc}):
        tuned = d["tuned"].get(base, {})

        def order(items):  # the first tuned value listed is 0 (an arm without tuned items runs it)
            return sum(tuned[k].index(x) for k, x in items if x in tuned.get(k, []))

        pool = [k for k in acc if k[:2] == (base, row)]
        best = max(pool, key=lambda k: (acc[k], -k[2], -order(k[3])))
        out.setdefault(base, {})[row] = {"train.lr": best[2], **dict(best[3])}
    return out


def edge_extensions(picks: dict, design: dict) -> dict[tuple, float]:
    """Issue 48: a pick on an edge of the lr grid is not bracketed. {(base, row): the lr one geometric
    step past that edge} for every such pick, when the design asks for it (design["bracket"]); the
    sweep runs those arms too (still on dev) and picks again by the same rule over all of them."""
    if not design.get("bracket"):
        return {}
    grid = sorted(design["lr_grid"])
    below, above = grid[0] * grid[0] / grid[1], grid[-1] * grid[-1] / grid[-2]
    out = {}
    for base, rows in picks.items():
        for row, keys in rows.items():
            if keys["train.lr"] in (grid[0], grid[-1]):
                out[(base, row)] = float(f"{below if keys['train.lr'] == grid[0] else above:.3g}")
    return out


def sweep_accuracy(cells_dir: str | Path, design: dict | None = None, seeds=None) -> dict[tuple, float]:
    """Mean dev accuracy per (base, swept row, lr, tuned items) over the finished selection cells
    (their axes.json: loss.base, variant_of, train.lr and the tuned keys); with SEEDS, an arm missing
    one of them is refused (the rule averages over every selection seed)."""
    d = design or TINY_BASES_DESIGN
    runs: dict[tuple, dict] = {}
    for cell in (c for c in cellstore.cells(cells_dir) if c.has("summary.json")):
        axes = cell.json("axes.json")
        if "variant_of" not in axes:
            continue
        base = axes["loss.base"]
        items = tuple((k, axes[k]) for k in d["tuned"].get(base, {}) if k in axes)
        key = (base, axes["variant_of"], float(axes["train.lr"]), items)
        runs.setdefault(key, {})[axes["train.seed"]] = cell.json("summary.json")["test_accuracy"]
    short = [k for k, by_seed in runs.items() if seeds is not None and set(seeds) - set(by_seed)]
    if short:
        raise ValueError(
            f"the sweep's {short[0][0]} {short[0][1]} at lr {short[0][2]:g} lacks seed(s) "
            f"{sorted(set(seeds) - set(runs[short[0]]))}: rerun to finish it before picking"
        )
    return {k: statistics.mean(v.values()) for k, v in runs.items()}


def write_picks(
    cells_dir: str | Path, out: str | Path, design: dict | None = None, seeds=None, extended: dict | None = None
) -> dict:
    """Pick from the sweep's cells and write OUT/picks.json (the rule, each arm's dev accuracy, the picks;
    `extended`: the edge picks whose grid the sweep extended, {(base, row): lr run beyond the edge})."""
    d = design or TINY_BASES_DESIGN
    acc = sweep_accuracy(cells_dir, d, seeds)
    result = {
        "rule": TINY_BASES_DESIGN["rule"],
        "seeds": sorted(seeds) if seeds is not None else None,
        "dev_accuracy": {
            " ".join([b, r, f"{lr:g}", *(f"{k}={x}" for k, x in items)]): a
            for (b, r, lr, items), a in sorted(acc.items())
        },
        "picks": pick_bases(acc, d),
        **({"extended": {f"{b} {r}": lr for (b, r), lr in sorted(extended.items())}} if extended else {}),
    }
    Path(out).mkdir(parents=True, exist_ok=True)
    Path(out, "picks.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def planned_comparisons(label: str, task: str, bases) -> dict:
    """design.json's comparisons for the bases in BASES, family LABEL: primary = each base's DACA row
    against its baseline; secondary = every other row the table prints (each baseline against the RL
    start, each other variant against its baseline, the compute-matched baseline against grpo's)
    and the cross-base rows of TINY_BASES_DESIGN (a field baseline against grpo's baseline and
    grpo +DACA; the compute-matched baseline against grpo +DACA), for bases that run."""
    row = lambda base, a, b: {"family": label, "task": task, "base": base, "variant": a, "vs": b}  # noqa: E731
    bases = list(bases)
    primary = [row(b, DACA_ROW[b], "baseline") for b in bases]
    secondary = [row(b, "baseline", "start") for b in bases]
    secondary += [row(b, v, "baseline") for b in bases for v in BASE_VARIANTS[b] if v not in ("baseline", DACA_ROW[b])]
    if "grpo" in bases:
        secondary.append(row("grpo", COMPUTE_MATCHED, "baseline"))
        secondary += [row(b, "baseline", f"grpo {vs}") for vs in ("baseline", "+DACA") for b in bases if b != "grpo"]
        secondary.append(row("grpo", COMPUTE_MATCHED, "grpo +DACA"))
    return {"primary": primary, "secondary": secondary}


# tiny-block's field arm, TraceRL as its code runs: its KL is to the old policy (loss.trace_kl), not a reference,
# and its trace canvases mask no prompt token
BLOCK_FIELD_KEYS = {"tracerl": {"loss.beta": 0.0, "sml.p_mask_prompt": 0.0}}


def field_rows(primary: list, secondary: list, preset) -> dict:
    """A preset of one method's base and comparator bases (TinyPreset.base_variants): PRIMARY and SECONDARY are
    the first base's rows; each other base adds, per family, its baseline vs start, each of its variants vs its
    baseline and its baseline vs the first base's +DACA (the comparator against the method), all secondary."""
    first = preset.bases[0]
    primary, secondary = [{**r, "base": first} for r in primary], [{**r, "base": first} for r in secondary]
    for b in preset.bases[1:]:
        mine = preset.base_variants.get(b, preset.variants)
        for label, fam in preset.families.items():
            row = lambda a, vs: {"family": label, "task": fam.task, "base": b, "variant": a, "vs": vs}  # noqa: E731
            secondary += [row("baseline", "start")] + [row(v, "baseline") for v in mine if v != "baseline"]
            if "+DACA" in preset.variants:
                secondary.append(row("baseline", f"{first} +DACA"))
    return {"primary": primary, "secondary": secondary}


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
    "compute_matched": {
        "base": "grpo",
        "variant": "baseline",
        "steps": "compute_matched_steps(32, ratio)",
        "ratio": "measured_cost_ratio(results/tiny-ablation/cells): +DACA over baseline training seconds "
        "per step on the committed confirmatory cells, fixed before the run",
    },
    # seeds 0-15 and 100-101 ran in committed tables (results/*/cells); these never did
    "confirmatory_seeds": list(range(16, 24)),
    "selection_seeds": [102, 103],
    "selection_split": "dev",  # disjoint from test (tests/unit/rl/test_regime.py)
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
        [
            {"base": b, "row": v, "against": f"{b} baseline"}
            for b in (*PAPER_BASES, *FIELD_BASES)
            for v in BASE_VARIANTS[b]
            if v not in ("baseline", DACA_ROW[b])
        ]
        + [{"base": b, "row": "baseline", "against": "grpo baseline"} for b in (*PAPER_BASES[1:], *FIELD_BASES)]
        + [{"base": b, "row": "baseline", "against": "grpo +DACA"} for b in (*PAPER_BASES[1:], *FIELD_BASES)]
        + [
            {"base": "grpo", "row": COMPUTE_MATCHED, "against": "grpo +DACA"},
            {"base": "grpo", "row": COMPUTE_MATCHED, "against": "grpo baseline"},
        ]
    ),
    "alpha": 0.05,
    "multiplicity": "holm within the primary family and within the secondary family "
    "(statsmodels.stats.multitest.multipletests)",
    "guards": "spg: a non-finite bound stops the cell (loss.spg_mode=mix; loss.spg_floor=-20)",
}
