"""What a variant name means: in a grid, either a bundle of keys on top of the grid's base config
(`VARIANTS`: `variant: +DACA` is `dps.enabled=true sml.k=4` and nothing else), or a preset's cell
named as `SOURCE:NAME` (`variant: headline:+DACA`), the keys `train --variant +DACA` applies.

    keys = variant_keys("+DACA", "sudoku_tiny")   # the keys `reproduce`'s tiny cell of +DACA sets
    named_keys("headline:+DACA", "sort4")          # the same cell's keys for a task of one's own

A preset cell's keys are, in the order `reproduce` applies them: the preset's regime (mu, prompt
masking, KL, clip, lr, test set), for a task of one of its families that family's canvas and
RL settings (steps, training reward), the variant's bundle (VARIANTS) and the reading the readings
sweep picked for it (its lr, score, normalisation, partition). SOURCE is `headline` (HEADLINE:
tiny-ablation, the default's regime with every variant) or a tiny preset's name (`tiny-full:+DACA`).
"""

from __future__ import annotations

HEADLINE = "tiny-ablation"  # the preset whose variants `train --variant` and `headline:NAME` name: the default's
# regime with every variant (the default, tiny, runs two of them: the same cells but for the test set's size)

VARIANTS = {
    "baseline": {"dps.enabled": False, "sml.k": 1},
    "+DPS": {"dps.enabled": True, "sml.k": 1},
    "+SML": {"dps.enabled": False, "sml.k": 4},
    "+DACA": {"dps.enabled": True, "sml.k": 4},
    "+DPS-random": {"dps.enabled": True, "dps.score": "random", "sml.k": 1},  # the control: weights without information
}
SOURCES = {"headline": HEADLINE}  # SOURCE of `SOURCE:NAME` -> its preset (any other SOURCE: a tiny preset's name)


def variant_names() -> tuple[str, ...]:
    from .presets import PRESETS

    return tuple(PRESETS[HEADLINE].variants)


def variant_keys(name: str, task: str, preset: str = HEADLINE) -> dict:
    """The dotted keys preset `preset`'s cell of variant `name` sets, for a run on `task`."""
    from ...config import ConfigError
    from .presets import PRESETS
    from .readings import overrides

    p = PRESETS[preset]
    if name not in p.variants:
        raise ConfigError(
            f"--variant {name!r} is not a variant of the {preset} preset; choose from {', '.join(p.variants)}"
        )
    keys = {"train.steps": p.rl_steps, **p.rl}
    fam = next((f for f in p.families.values() if f.task == task), None)
    if fam is not None:
        keys.update(
            {
                **{f"rollout.{k}": v for k, v in fam.canvas.items()},
                **{f"eval.{k}": v for k, v in fam.canvas.items()},
                **fam.rl,
            }
        )
    return {**keys, **VARIANTS[name], **overrides(p.picks, name)}


def split_variant(value: str) -> tuple[str, str]:
    """A grid's variant value -> (SOURCE, NAME): ('', '+DACA') for a bundle of VARIANTS,
    ('headline', '+DACA') for `headline:+DACA`; a ConfigError (one line) for anything else."""
    from ...config import ConfigError
    from .presets import PRESETS, TinyPreset

    if value in VARIANTS:
        return "", value
    source, sep, name = str(value).partition(":")
    preset = SOURCES.get(source, source)
    if not sep or not isinstance(PRESETS.get(preset), TinyPreset):
        raise ConfigError(
            f"unknown variant {value!r}; choose from {', '.join(VARIANTS)}, or name a preset's cell as "
            f"SOURCE:NAME (headline:+DACA; SOURCE: headline or a tiny preset of `reproduce --list`)"
        )
    if name not in PRESETS[preset].variants:
        raise ConfigError(
            f"variant {value!r}: {name!r} is not a variant of the {preset} preset; choose from "
            f"{', '.join(PRESETS[preset].variants)}"
        )
    return source, name


def named_keys(value: str, task: str) -> dict:
    """The keys of a grid's variant value on `task`: VARIANTS' bundle, or the named preset cell's keys."""
    source, name = split_variant(value)
    return variant_keys(name, task, SOURCES.get(source, source)) if source else dict(VARIANTS[name])
