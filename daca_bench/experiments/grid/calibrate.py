"""`daca-bench reproduce --calibrate FAMILY`: one tiny family's learning curve over learning rates
(and variants, seeds, `--set` overrides), scored on the dev split, never the test set. Its table
is what docs/reproducing.md's calibration rows were read from.

    daca-bench reproduce --preset tiny-full --calibrate code --lrs 1e-4 2e-4 --seeds 0 1 --set train.n_eval=512
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ...config import ConfigError, apply, pick
from .ablation import Cell, evaluate_starts
from .executors import run_local
from .pipeline import run_sft, tiny_cells
from .presets import TinyPreset


def calibrate(
    preset: TinyPreset,
    label: str,
    lrs,
    variants,
    steps: int | None,
    seeds,
    work: Path,
    workers: int,
    progress: bool,
    sets: dict | None = None,
) -> str:
    """Run FAMILY's cells over train.lr x variants (one seed by default) with an evaluation on the
    DEV split every fifth of the run (a calibration never looks at the test set); return a
    Markdown table of dev accuracy per step with the mean training reward, loss and gradient norm
    (what tells a step budget that moves the baseline, and an unstable update, apart). SETS
    ({key: value}, `--set`) override the family's RL config (e.g. train.reward=exact), never the split."""
    fam = pick(preset.families, label, "--calibrate")
    split = (sets or {}).get("train.eval_split", "dev")
    if split != "dev":
        raise ConfigError(
            f"reproduce --calibrate scores on the dev split only; --set train.eval_split={split} is "
            "refused (the test split is for the confirmatory table)"
        )
    fam = replace(fam, rl={**fam.rl, **(sets or {}), "train.eval_split": "dev"})  # dev wins over every override
    one = replace(preset, families={label: fam}, rl={**preset.rl, "train.eval_split": "dev"})
    sft = run_sft(one, work, workers, progress)
    n = steps or fam.rl.get("train.steps", preset.rl_steps)
    cells = []
    for cell in tiny_cells(one, sft, n, seeds or (0,)):
        if cell.axes["variant"] not in variants:
            continue
        for lr in lrs:
            cfg = apply(cell.config, {"train.lr": lr, "train.eval_every": max(1, n // 5)})
            cells.append(Cell(f"{cell.name}_lr={lr:g}", {**cell.axes, "train.lr": lr}, cfg))
    if any(c.config.train.eval_split != "dev" for c in cells):  # a guard on the guard above
        raise ConfigError("reproduce --calibrate: a calibration cell would score on another split than dev")
    folder = work / f"calibrate-{label}" / slug_sets(sets)
    start = evaluate_starts(cells, folder)
    run_local(cells, folder, workers, desc=f"calibrate {label}", progress=progress)
    lines = [
        f"{label} ({fam.task}{', ' + ' '.join(f'{k}={v}' for k, v in sets.items()) if sets else ''}): "
        f"RL start {100 * start[fam.task]:.1f} % on the dev split",
        "| variant | lr | seed | dev acc % by step | final % | reward (first 5 -> last 5 steps) | loss | grad norm |",
        "|---|---:|---:|---|---:|---|---:|---:|",
    ]
    for cell in cells:
        rows = [json.loads(x) for x in (folder / cell.name / "metrics.jsonl").read_text().splitlines() if x.strip()]
        final = json.loads((folder / cell.name / "summary.json").read_text())["test_accuracy"]
        curve = " ".join(f"{r['step']}:{100 * r['test_accuracy']:.1f}" for r in rows if "test_accuracy" in r)
        mean = lambda k, rs: sum(r[k] for r in rs) / max(1, len(rs))  # noqa: E731
        base = cell.axes.get("loss.base", "grpo")
        arm = cell.axes["variant"] if base == "grpo" else f"{base} {cell.axes['variant']}"  # a preset with bases
        lines.append(
            f"| {arm} | {cell.axes['train.lr']:g} | {cell.config.train.seed} | {curve} | "
            f"{100 * final:.1f} | {mean('reward_mean', rows[:5]):.3f} -> {mean('reward_mean', rows[-5:]):.3f} | "
            f"{mean('loss', rows):.4f} | {mean('grad_norm', rows):.3f} |"
        )
    return "\n".join(lines) + "\n"


def slug_sets(sets: dict | None) -> str:
    return "_".join(f"{k}={v}" for k, v in sorted((sets or {}).items())) or "preset"
