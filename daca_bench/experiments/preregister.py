"""The design a confirmatory preset registers before its first cell starts: design.json in its
results folder (schema: experiments/design.py's `validate`), built from the cells it will run.

    design = design_of("tiny", PRESETS["tiny"], cells, commit=describe())
    register(out, design)      # writes out/design.json; refuses a folder holding another design

The families, seeds, steps and test sets are read from the cells themselves (after --seeds,
--steps, --families), so the design is what runs; the comparisons are the preset's planned ones.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .design import write_design
from .presets import TinyPreset, comparisons

ALPHA = 0.05
MULTIPLICITY = "holm"
BAR = ("each planned comparison is decided by its Holm-adjusted two-sided p < 0.05 within its family (primary, "
       "secondary); comparisons outside both families are exploratory. A gain 'past its MDE' (MDE = 2.8 SE, 80 % "
       "power at alpha 0.05) is the stricter threshold two-sided p < 0.005: reported, not the decision rule")
DRAW = ("the first {size} samples of {task}'s {split} split generated with seed {seed} "
        "(get_task(task, split, n, seed)); every cell of the family and its RL start are scored on them")


def design_of(name: str, preset: TinyPreset, cells: list, commit: str) -> dict:
    """The design.json dict for a tiny preset's CELLS (ablation.Cell), from code COMMIT."""
    families = {}
    for label, fam in preset.families.items():
        mine = [c.config.train for c in cells if c.config.train.task == fam.task]
        if not mine:
            continue
        t = mine[0]
        steps = sorted({c.steps for c in mine})
        if len(steps) > 1 or any((c.eval_split, c.n_eval, c.test_seed) != (t.eval_split, t.n_eval, t.test_seed)
                                 for c in mine):
            raise ConfigError(f"family {label}: its cells differ in steps or test set; a design has one of each")
        families[label] = {"task": fam.task, "seeds": sorted({c.seed for c in mine}), "steps": steps[0],
                           "test": {"split": t.eval_split, "size": t.n_eval, "seed": t.test_seed,
                                    "draw": DRAW.format(size=t.n_eval, task=fam.task, split=t.eval_split,
                                                        seed=t.test_seed)}}
    planned = {k: [c for c in rows if c["family"] in families] for k, rows in comparisons(preset).items()}
    return {"schema": 1, "preset": name, "commit": commit, "alpha": ALPHA, "multiplicity": MULTIPLICITY, "bar": BAR,
            "families": families, "comparisons": planned, "bases": list(preset.bases),
            "variants": list(preset.variants)}


def register(out: Path, design: dict) -> Path:
    """Write OUT/design.json before the first cell (design.write_design validates it); the same
    design again is kept, another is refused."""
    return write_design(out, design)
