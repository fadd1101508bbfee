"""The headline's cells for a single run: what `train --variant +DACA` applies, read from the
presets that define them (never restated here).

    keys = variant_keys("+DACA", "sudoku_tiny")   # the keys `reproduce`'s tiny cell of +DACA sets

A variant's keys are, in the order `reproduce` applies them: the preset's regime (mu, prompt
masking, KL, clip, lr, test set), for a task of one of its families that family's canvas and
RL settings (steps, training reward), the variant's bundle (ablation.VARIANTS) and the reading
the readings sweep picked for it (its lr, score, normalisation, partition).
"""
from __future__ import annotations

HEADLINE = "tiny"  # the preset whose table the README reports


def variant_names() -> tuple[str, ...]:
    from .presets import PRESETS

    return tuple(PRESETS[HEADLINE].variants)


def variant_keys(name: str, task: str, preset: str = HEADLINE) -> dict:
    """The dotted keys preset `preset`'s cell of variant `name` sets, for a run on `task`."""
    from ...config import ConfigError
    from .ablation import VARIANTS
    from .readings import overrides
    from .presets import PRESETS

    p = PRESETS[preset]
    if name not in p.variants:
        raise ConfigError(f"--variant {name!r} is not a variant of the {preset} preset; choose from {', '.join(p.variants)}")
    keys = {"train.steps": p.rl_steps, **p.rl}
    fam = next((f for f in p.families.values() if f.task == task), None)
    if fam is not None:
        keys.update({**{f"rollout.{k}": v for k, v in fam.canvas.items()},
                     **{f"eval.{k}": v for k, v in fam.canvas.items()}, **fam.rl})
    return {**keys, **VARIANTS[name], **overrides(p.picks, name)}

