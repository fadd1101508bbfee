"""Cost of a grid's cells by stage, read from their metrics (no rerun): mean seconds per cell in
each phase of the training step (rollout, verify, credit, old/reference log-probs, update), the
rest (evaluation, loading, checkpoints) from the cell's wall-clock, and forward passes, per
variant. Two grids side by side when given two folders (e.g. the mu = 1 default against the
d1-like regime).

    .venv/bin/python benchmarks/cell_cost.py results/tiny/cells [runs/reproduce/tiny-readings]
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


def cell_costs(folder: Path) -> dict[str, dict[str, float]]:
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
        # the cell's wall-clock: from its config (written first) to its summary (written last)
        cost["wall"] = (cell / "summary.json").stat().st_mtime - (cell / "config.json").stat().st_mtime
        by_variant[axes.get("variant", cell.name)].append(cost)
    return {v: {k: statistics.mean(c[k] for c in cs) for k in cs[0]} | {"cells": len(cs)} for v, cs in by_variant.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folders", nargs="+", type=Path)
    args = ap.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}")
    for folder in args.folders:
        print(f"\n{folder} (mean seconds per cell; wall = config.json to summary.json)")
        print("| variant | cells | " + " | ".join(PHASES) + " | wall | forward passes | clip frac % |")
        print("|---|---:|" + "---:|" * (len(PHASES) + 3))
        for v, c in sorted(cell_costs(folder).items()):
            print(f"| {v} | {c['cells']} | " + " | ".join(f"{c[p]:.1f}" for p in PHASES) +
                  f" | {c['wall']:.0f} | {c['passes']:.0f} | {100 * c['clip_frac']:.2f} |")


if __name__ == "__main__":
    main()
