"""The design a confirmatory preset registers before its first cell starts: design.json in its
results folder (schema: experiments/analysis/design.py's `validate`), built from the cells it will run.

    design = design_of("tiny", PRESETS["tiny"], cells, commit=describe())
    register(out, design)      # writes out/design.json; refuses a folder holding another design

The families, seeds, steps and test sets are read from the cells themselves (after --seeds,
--steps, --families, --bases), so the design is what runs; the comparisons are the preset's planned
ones. A per-base preset (tiny-bases) also registers each base's variants, the compute-matched
cell's ratio and steps (`other_steps` beside the family's), and its lr sweep's seeds, split and rule.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import ConfigError
from ..analysis.design import write_design
from .presets import TinyPreset, comparisons

ALPHA = 0.05
MULTIPLICITY = "holm"
BAR = (
    "each planned comparison is decided by its Holm-adjusted two-sided p < 0.05 within its family (primary, "
    "secondary); comparisons outside both families are exploratory. A gain 'past its MDE' (MDE = 2.8 SE, 80 % "
    "power at alpha 0.05) is the stricter threshold two-sided p < 0.005: reported, not the decision rule"
)
DRAW = (
    "the first {size} samples of {task}'s {split} split generated with seed {seed} "
    "(get_task(task, split, n, seed)); every cell of the family and its RL start are scored on them"
)
FRESH = (
    "the first {size} samples of {task}'s {split} split generated with seed {seed} (get_task(task, split, "
    "n=2 x {size} + {skipped}, seed)) whose prompt text is neither among the {skipped} listed in {exclude} "
    "(every prompt of the split a committed table scored before) nor a repeat (registry.draw_test); every cell "
    "of the family and its RL start are scored on them"
)


def test_block(task: str, t) -> dict:
    """A family's test set in design.json (TrainConfig t): split, size, seed, how it is drawn, and
    with train.test_exclude the list it skips (path, count, digest) and the digest of the prompt ids drawn."""
    from ...registry import ids_digest, read_excluded, test_set

    block = {"split": t.eval_split, "size": t.n_eval, "seed": t.test_seed}
    if not t.test_exclude:
        return {**block, "draw": DRAW.format(size=t.n_eval, task=task, split=t.eval_split, seed=t.test_seed)}
    skip = read_excluded(t.test_exclude)
    drawn = [s.id for s in test_set(t).samples]
    return {
        **block,
        "exclude": t.test_exclude,
        "excluded": len(skip),
        "exclude_sha256": ids_digest(skip),
        "ids_sha256": ids_digest(drawn),
        "draw": FRESH.format(
            size=t.n_eval, task=task, split=t.eval_split, seed=t.test_seed, skipped=len(skip), exclude=t.test_exclude
        ),
    }


def design_of(name: str, preset: TinyPreset, cells: list, commit: str, tree: str = "") -> dict:
    """The design.json dict for a tiny preset's CELLS (ablation.Cell), from code COMMIT (and its
    provenance.code_tree TREE, which lets the cells run from a later commit with the same code)."""
    families, matched = {}, {}
    for label, fam in preset.families.items():
        cells_of = [c for c in cells if c.config.train.task == fam.task]
        if not cells_of:
            continue
        mine = [c.config.train for c in cells_of]
        t = mine[0]
        # the compute-matched baseline runs more steps by design (its axes record the ratio): named apart
        other = {
            f"{c.axes['loss.base']} {c.axes['variant']}": c.config.train.steps
            for c in cells_of
            if "compute_ratio" in c.axes
        }
        steps = sorted({c.config.train.steps for c in cells_of if "compute_ratio" not in c.axes})
        if len(steps) > 1 or any(
            (c.eval_split, c.n_eval, c.test_seed) != (t.eval_split, t.n_eval, t.test_seed) for c in mine
        ):
            raise ConfigError(f"family {label}: its cells differ in steps or test set; a design has one of each")
        families[label] = {
            "task": fam.task,
            "seeds": sorted({c.seed for c in mine}),
            "steps": steps[0],
            "test": test_block(fam.task, t),
            **({"other_steps": other} if other else {}),
        }
        for c in cells_of:
            if "compute_ratio" in c.axes:
                matched[f"{label} {c.axes['loss.base']} {c.axes['variant']}"] = {
                    "compute_ratio": c.axes["compute_ratio"],
                    "base_steps": c.axes["base_steps"],
                    "steps": c.config.train.steps,
                }
    planned = {k: [c for c in rows if c["family"] in families] for k, rows in comparisons(preset).items()}
    design = {
        "schema": 1,
        "preset": name,
        "commit": commit,
        "alpha": ALPHA,
        "multiplicity": MULTIPLICITY,
        "bar": BAR,
        "families": families,
        "comparisons": planned,
        "bases": list(preset.bases),
        "variants": list(preset.variants),
        **({"base_variants": {b: list(v) for b, v in preset.base_variants.items()}} if preset.base_variants else {}),
        **({"base_keys": preset.base_keys} if preset.base_keys else {}),
        **({"code_tree": tree} if tree else {}),
        **({"notes": preset.notes} if preset.notes else {}),
    }
    if preset.arms == "bases":
        design.update(per_base(preset, cells, matched))
    if preset.arms in ("compute", "compute-starts"):
        from . import compute_grid as g

        steps = max(c.config.train.steps for c in cells)
        design.update(
            question=g.QUESTION,
            compute={
                "measure": g.MEASURE,
                "base_steps": g.base_of(steps),
                "matched_steps": steps,
                "eval_every": cells[0].config.train.eval_every,
                "flops_ratio": g.FLOPS_RATIO,
                "ratio": "daca-bench cost: +DACA over baseline training FLOPs per step "
                "(cost.matched_steps), before any cell",
                "sft_starts": sorted({c.axes["sft_start"] for c in cells}),
                "random_effect": "sft_start",
                "lr": "fixed in advance: the committed readings picks, the same at both budgets",
            },
        )
    if preset.arms == "compute-starts":
        design.update(question=g.STARTS_QUESTION, power=starts_power(preset, cells), cpu=g.cpu_estimate(cells))
    if preset.exploratory:
        design["exploratory"] = preset.exploratory
    return design


def starts_power(preset: TinyPreset, cells: list) -> dict:
    """The power analysis of a design over SFT starts (compute_grid.assumed_power), at its own numbers of
    starts, seeds per start and test clusters."""
    from ...resources import data_dir
    from . import compute_grid as g

    ROOT = data_dir("configs").parent  # noqa: N806 - the repository (or the wheel's data): results/ beside configs/

    label, fam = next(iter(preset.families.items()))
    starts = sorted({c.axes["sft_start"] for c in cells})
    units = {(c.axes["sft_start"], c.config.train.seed) for c in cells}
    return g.assumed_power(
        ROOT,
        label,
        fam.task,
        max(c.config.train.steps for c in cells),
        len(starts),
        len(units) // len(starts),
        g.test_clusters(fam.task, {**preset.rl, **fam.rl}),
    )


def per_base(preset: TinyPreset, cells: list, matched: dict) -> dict:
    """What a per-base preset adds: each base's variants as they run, the compute-matched cell's
    ratio and steps, and the lr sweep that picks the lrs before any confirmatory cell (its seeds and
    split, disjoint from the families', its grid and its rule)."""
    from .bases_grid import TINY_BASES_DESIGN

    variants: dict = {}
    for c in cells:
        names = variants.setdefault(c.axes["loss.base"], [])
        if c.axes["variant"] not in names:
            names.append(c.axes["variant"])
    seeds = {c.config.train.seed for c in cells}
    sel = preset.selection
    if seeds & set(sel["selection_seeds"]) or any(c.config.train.eval_split == sel["selection_split"] for c in cells):
        raise ConfigError("the lr sweep's seeds or split overlap the confirmatory cells'; a design keeps them apart")
    return {
        "variants": variants,
        "compute_matched": matched,
        "selection": {
            **sel,
            "rule": TINY_BASES_DESIGN["rule"],
            "picks": "picks.json (written after the sweep, before the first confirmatory cell)",
        },
        "question": TINY_BASES_DESIGN["question"],
        "guards": TINY_BASES_DESIGN["guards"],
    }


UNTIED = ("commit", "written", "date")  # what a design committed before its run differs in from the run's own


def register(out: Path, design: dict, committed: Path | None = None) -> tuple[Path, str]:
    """Write OUT/design.json before the first cell (design.write_design validates it; the same
    design again is kept, another is refused): (its path, a note). With COMMITTED (the preset's
    design file, committed before the run) the committed design is registered when the run's own
    equals it but for its commit (same code: code_tree), else the run's own, and the note says why."""
    if committed is not None and committed.is_file():
        from ..analysis.design import read_design

        fixed = read_design(committed.parent) if committed.name == "design.json" else None
        if fixed is not None:
            differ = sorted(k for k in set(fixed) | set(design) if k not in UNTIED and fixed.get(k) != design.get(k))
            if differ == ["code_tree"]:
                raise ConfigError(
                    f"{committed} was written from other code (code_tree {fixed.get('code_tree')}, this "
                    f"checkout {design.get('code_tree')}): rewrite it with `daca-bench reproduce --preset "
                    f"{design['preset']} --design-only --output-dir {committed.parent}`, commit it, then run"
                )
            if not differ:
                return write_design(out, fixed), f"the design committed before the run ({committed}, {fixed['commit']})"
            return write_design(out, design), (
                f"not the design committed in {committed} (this run differs in "
                f"{', '.join(differ)}): its own, written now"
            )
    return write_design(out, design), "written now, before the first cell"
