"""Cost of a grid's cells by stage, read from their metrics (no rerun): mean seconds per cell in
each phase of the training step (rollout, verify, credit, old/reference log-probs, update), the
rest (evaluation, loading, checkpoints) from the cell's wall-clock, and forward passes, per
(task, variant), or with --by-base per (task, base and row: tiny-bases, its lr sweep pooled over
the lrs). Two grids side by side when given two folders (e.g. the mu = 1 default against the
d1-like regime). With --workers N ...: a cost model, not a measurement: the grid's makespan on N
single-thread workers, each cell taking its measured wall-clock (longest cells first, as
`reproduce` orders them, each to the first free worker; no contention between workers modelled).
It reads a grid's work folder (its files' times are the wall-clock): not a packed results folder.

    .venv/bin/python benchmarks/training/cell_cost.py runs/reproduce/tiny-ablation [runs/reproduce/tiny-readings]
    .venv/bin/python benchmarks/training/cell_cost.py runs/reproduce/tiny-full --workers 2 16
    .venv/bin/python benchmarks/training/cell_cost.py runs/reproduce/tiny-bases-selection --by-base
    .venv/bin/python benchmarks/training/cell_cost.py runs/reproduce/tiny-cache --guards    # a row per variant and setting
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections import defaultdict
from pathlib import Path

PHASES = ("rollout", "verify", "credit", "likelihood_old", "update")
GUARDS = ("guard_fallback_frac", "guard_commit_entropy", "guard_distinct_frac")


def cell_costs(folder: Path, by_base: bool = False) -> dict[tuple[str, str], dict[str, float]]:
    by_variant = defaultdict(list)
    for metrics in sorted(folder.glob("*/metrics.jsonl")):
        cell = metrics.parent
        if not (cell / "summary.json").exists():
            continue
        rows = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()]
        axes = json.loads((cell / "axes.json").read_text()) if (cell / "axes.json").exists() else {}
        cost = {p: sum(r.get(f"seconds_{p}", 0.0) for r in rows) for p in PHASES}
        cost["passes"] = sum(sum(v for k, v in r.items() if k.startswith("passes_")) for r in rows)
        cost["clip_frac"] = statistics.mean(r.get("clip_frac", 0.0) for r in rows)
        for g in GUARDS:  # the rollout guards' per-step columns (daca_bench/train/guards.py), mean over steps
            vals = [r[g] for r in rows if r.get(g) is not None]
            cost[g] = statistics.mean(vals) if vals else float("nan")
        # the cell's wall-clock: from its axes.json (written when it starts; config.json is rewritten at
        # its end with the grid's provenance) to its summary (written last), in a grid's work folder
        first = cell / "axes.json" if (cell / "axes.json").exists() else cell / "config.json"
        cost["wall"] = (cell / "summary.json").stat().st_mtime - first.stat().st_mtime
        cost["rest"] = cost["wall"] - sum(cost[p] for p in PHASES)  # loading, the test evaluation, checkpoints
        row = axes.get("variant", cell.name) + (f" [{axes['setting']}]" if "setting" in axes else "")
        if by_base:  # a per-base grid (tiny-bases): base and row; its lr sweep's cells pooled over their lrs
            row = f"{axes.get('loss.base', '')} {axes.get('variant_of', row)}"
        by_variant[(axes.get("train.task", ""), row)].append(cost)
    return {
        v: {k: statistics.mean(c[k] for c in cs) for k in cs[0]} | {"cells": len(cs), "walls": [c["wall"] for c in cs]}
        for v, cs in by_variant.items()
    }


def makespan(walls: list[float], workers: int) -> float:
    """Longest-first list scheduling of the cells on `workers` identical workers."""
    free = [0.0] * workers
    for w in sorted(walls, reverse=True):
        i = free.index(min(free))
        free[i] += w
    return max(free)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--workers", type=int, nargs="*", default=[], help="model the grid's makespan on N workers")
    ap.add_argument("--by-base", action="store_true", help="rows per base and variant (a per-base grid)")
    ap.add_argument(
        "--guards",
        action="store_true",
        help="also the rollout guards, mean over steps: fallback "
        "steps %% (threshold rollouts), committed-token entropy (nats), distinct completions per group %%",
    )
    args = ap.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}")
    for folder in args.folders:
        print(f"\n{folder} (mean seconds per cell; wall = axes.json to summary.json, in the work folder)")
        guards = " | fallback % | entropy | distinct %" if args.guards else ""
        print(
            "| task | variant | cells | " + " | ".join(PHASES) + " | rest (load, evaluation, checkpoints) | wall | "
            f"forward passes | clip frac %{guards} |"
        )
        print("|---|---|---:|" + "---:|" * (len(PHASES) + 4 + 3 * args.guards))
        costs = cell_costs(folder, args.by_base)
        for (task, v), c in sorted(costs.items()):
            extra = (
                (
                    f" | {100 * c['guard_fallback_frac']:.1f} | {c['guard_commit_entropy']:.2f} | "
                    f"{100 * c['guard_distinct_frac']:.1f}"
                )
                if args.guards
                else ""
            )
            print(
                f"| {task} | {v} | {c['cells']} | "
                + " | ".join(f"{c[p]:.1f}" for p in PHASES)
                + f" | {c['rest']:.1f} | {c['wall']:.0f} | {c['passes']:.0f} | {100 * c['clip_frac']:.2f}{extra} |"
            )
        walls = [w for c in costs.values() for w in c["walls"]]
        for n in args.workers:
            print(
                f"\nmodel: {len(walls)} cells, {sum(walls) / 60:.1f} worker-min; on {n} workers the grid takes "
                f"{makespan(walls, n) / 60:.1f} min (a cost model from the measured walls, not a measurement)"
            )


if __name__ == "__main__":
    main()
