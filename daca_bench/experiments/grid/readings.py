"""The readings of DACA that the paper's abstract allows, and the rule that picks one per method
without looking at the test set (docs/reproducing.md, "The regime and the readings").

    daca-bench reproduce --preset tiny-readings   # the sweep: selection seeds, dev split -> picks.json
    daca-bench reproduce --preset tiny-confirm    # the confirmatory table: seeds 0-7, test split

A reading is a named bundle of config keys on top of a variant. The sweep runs every reading at
every learning rate of its preset on seeds the confirmatory table never uses and scores each cell
on the dev split (disjoint from test); `pick` then applies the rule below, fixed before the sweep
ran, and the confirmatory presets carry its picks (a test checks they agree with the committed
picks.json).

The rule is `RULE` below (also written into picks.json and docs/reproducing.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..analysis import cellstore

RULE = (  # fixed before the sweep ran; written into picks.json
    "(1) the baseline's lr is the one with the highest mean dev accuracy over the selection seeds; (2) "
    "for DPS and for SML separately, the (reading, lr) with the highest mean dev accuracy, the random-"
    "weight control excluded; (3) +DACA is the picked DPS reading with the picked SML reading, at SML's "
    "picked lr (SML changes the likelihood whose gradient the lr scales); the control is "
    "`dps.score=random` with the picked DPS normalisation, at DPS's picked lr. Ties go to the cheaper "
    "reading, then to the first listed. "
)

# name -> (method, variant it refines, config keys)
READINGS = {
    "baseline": ("baseline", "baseline", {}),
    "+DPS:progress": ("DPS", "+DPS", {"dps.score": "progress", "dps.norm": "rank"}),
    "+DPS:surprise": ("DPS", "+DPS", {"dps.score": "surprise", "dps.norm": "rank"}),
    "+DPS:commit_time": ("DPS", "+DPS", {"dps.score": "commit_time", "dps.norm": "rank"}),
    "+DPS:progress-zscore": ("DPS", "+DPS", {"dps.score": "progress", "dps.norm": "zscore"}),
    "+DPS:random": ("control", "+DPS", {"dps.score": "random", "dps.norm": "rank"}),
    "+SML:random": ("SML", "+SML", {"sml.partition": "random", "sml.k": 4}),
    "+SML:strided": ("SML", "+SML", {"sml.partition": "strided", "sml.k": 4}),
    "+SML:commit_order": ("SML", "+SML", {"sml.partition": "commit_order", "sml.k": 4}),
    "+SML:causal": ("SML", "+SML", {"sml.partition": "causal", "sml.k": 4}),
}


def reading_name(reading: str, lr: float, base_lr: float) -> str:
    """The cell's variant label: the reading, with '@lr' when it runs at another lr than the first."""
    return reading if lr == base_lr else f"{reading}@{lr:g}"


def _cost(reading: str) -> int:
    return READINGS[reading][2].get("sml.k", 1)


def pick(acc: dict[tuple[str, float], float]) -> dict:
    """(reading, lr) -> mean dev accuracy over the selection seeds  ->  the picks, by the module's rule."""

    def best(method):
        pool = [(r, lr) for (r, lr) in acc if READINGS[r][0] == method]
        order = {r: i for i, r in enumerate(READINGS)}
        return max(pool, key=lambda k: (acc[k], -_cost(k[0]), -order[k[0]], -k[1])) if pool else None

    base, dps, sml = best("baseline"), best("DPS"), best("SML")
    if not (base and dps and sml):
        raise ValueError("the sweep needs finished baseline, DPS and SML cells to pick from")
    dps_keys, sml_keys = READINGS[dps[0]][2], READINGS[sml[0]][2]
    picks = {
        "baseline": {"reading": "baseline", "train.lr": base[1]},
        "+DPS": {"reading": dps[0], "train.lr": dps[1], **dps_keys},
        "+SML": {"reading": sml[0], "train.lr": sml[1], **sml_keys},
        "+DACA": {"reading": f"{dps[0]} with {sml[0]}", "train.lr": sml[1], **dps_keys, **sml_keys},
        "+DPS-random": {
            "reading": "+DPS:random",
            "train.lr": dps[1],
            "dps.score": "random",
            "dps.norm": dps_keys["dps.norm"],
        },
    }
    return {"rule": RULE, "dev_accuracy": {f"{r}@{lr:g}": a for (r, lr), a in sorted(acc.items())}, "picks": picks}


def sweep_accuracy(cells_dir: str | Path) -> dict[tuple[str, float], float]:
    """Mean dev accuracy per (reading, lr) over the finished cells of a sweep."""
    sums: dict[tuple[str, float], list[float]] = {}
    for cell in (c for c in cellstore.cells(cells_dir) if c.has("summary.json")):
        axes = cell.json("axes.json")
        if "reading" not in axes:
            continue
        s = cell.json("summary.json")
        sums.setdefault((axes["reading"], float(axes["train.lr"])), []).append(s["test_accuracy"])
    return {k: sum(v) / len(v) for k, v in sums.items()}


def write_picks(cells_dir: str | Path, out: str | Path) -> dict:
    result = pick(sweep_accuracy(cells_dir))
    Path(out, "picks.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def overrides(picks: dict, variant: str) -> dict:
    """The config keys a confirmatory variant takes from the picks (its lr and reading keys)."""
    return {k: v for k, v in picks.get(variant, {}).items() if k != "reading"}
