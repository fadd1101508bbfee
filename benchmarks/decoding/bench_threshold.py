"""Threshold decoding on trained tiny models (issue 47, item 4): where does Fast-dLLM's confidence
threshold cut the denoising passes, what does it cost in accuracy, and what does it do to the
trajectory record DACA reads? For every tiny family's SFT start (the RL start of the tiny presets),
side by side in one process:

- schedule: the families' canvas decoded two tokens a step (L/2 passes), as every tiny cell does;
- threshold 0.9 / 0.7 / 0.5: every masked position whose confidence passes it is committed in the
  pass, at least one (the most confident); at most L passes.

Greedy evaluation (test prompts, exact match) gives the accuracy, the passes and the wall-clock of
the evaluation; sampled rollouts (temperature 0.9, G = 8 per prompt, the training's shape) give
the passes and wall-clock of a rollout, the share of steps that committed only their forced token
(`fallback`), the tokens committed per pass and the spread of the DPS weights the record yields
(`dps_w_std`, progress score): how much credit structure DACA still sees.

    PYTHONPATH=. python -m benchmarks.decoding.bench_threshold                       # SFT starts first if missing
    PYTHONPATH=. python -m benchmarks.decoding.bench_threshold --families sudoku math --prompts 64 --json th.json

The SFT starts are the tiny presets' own (experiments/grid/pipeline.run_sft, cached by config under
--work-dir, runs/reproduce by default); missing ones are trained first (about 10 minutes for all
five on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import replace
from pathlib import Path

import torch

THRESHOLDS = (0.9, 0.7, 0.5)


def settings(gen_length: int) -> dict:
    """name -> SamplerConfig keys: the schedule (two tokens a pass) and each threshold (one block)."""
    out = {"schedule": {"threshold": None, "steps": gen_length // 2}}
    out.update({f"threshold {th}": {"threshold": th, "steps": gen_length} for th in THRESHOLDS})
    return out


def record_stats(batch, L: int) -> dict:
    """Passes, tokens per pass and the share of passes that committed only their forced token, from
    the commit steps of each row, and the DPS weights' spread (progress score) over valid tokens."""
    from daca_bench.config import DPSConfig
    from daca_bench.rl.credit import dps_weights, weight_stats

    steps = batch.commit_step  # (N, L), 1-based
    per_row_passes = steps.max(dim=1).values.float()
    counts = torch.zeros(steps.shape[0], int(steps.max()) + 1)
    counts.scatter_add_(1, steps, torch.ones_like(steps, dtype=torch.float))
    used = counts[:, 1:] > 0
    fallback = ((counts[:, 1:] == 1) & used).sum() / used.sum()
    w = dps_weights(batch.trajectory, batch.completion_mask, DPSConfig(enabled=True))
    return {
        "passes": batch.forward_passes,
        "row_passes": per_row_passes.mean().item(),
        "tokens_per_pass": L / per_row_passes.mean().item(),
        "fallback": fallback.item(),
        "dps_w_std": weight_stats(w, batch.completion_mask)["dps_w_std"],
    }


def study(label: str, fam, folder: str, prompts: int, group: int) -> list[dict]:
    from daca_bench.config import ModelConfig, SamplerConfig
    from daca_bench.eval.evaluate import evaluate
    from daca_bench.models import load_model
    from daca_bench.registry import get_task
    from daca_bench.rl.sampler import sample

    adapter = load_model(replace(ModelConfig(), name=str(Path(folder) / "final")))
    adapter.model.eval()
    task = get_task(fam.task, split="test", n=prompts, seed=0)
    train = get_task(fam.task, split="train", n=prompts, seed=0)
    L = fam.gen_length
    rows = []
    for name, keys in settings(L).items():
        cfg = replace(SamplerConfig(), gen_length=L, block_length=L, batch_size=prompts * group, **keys)
        t0 = time.perf_counter()
        ev = evaluate(adapter, task, replace(cfg, temperature=0.0), n=prompts)
        eval_s = time.perf_counter() - t0
        rollout_cfg = replace(cfg, temperature=0.9)
        t0 = time.perf_counter()
        with torch.no_grad():
            batch = sample(
                adapter,
                [s.prompt for s in train.samples for _ in range(group)],
                rollout_cfg,
                seed=list(range(prompts * group)),
            )
        roll_s = time.perf_counter() - t0
        rows.append(
            {
                "family": label,
                "task": fam.task,
                "L": L,
                "setting": name,
                "accuracy": ev["accuracy"],
                "eval_passes": ev["forward_passes"],
                "eval_s": round(eval_s, 3),
                "rollout_s": round(roll_s, 3),
                **record_stats(batch, L),
            }
        )
        r = rows[-1]
        print(
            f"  {label:9s} {name:14s} acc {100 * r['accuracy']:5.1f} %  eval {r['eval_passes']:3d} passes "
            f"{r['eval_s']:6.2f} s | rollout {r['passes']:3d} passes {r['rollout_s']:6.2f} s, "
            f"{r['tokens_per_pass']:.2f} tok/pass, fallback {100 * r['fallback']:.0f} %, dps_w_std {r['dps_w_std']:.3f}",
            flush=True,
        )
    return rows


def main(argv=None) -> int:
    from daca_bench.experiments.grid.pipeline import run_sft
    from daca_bench.experiments.grid.presets import FIVE, PRESETS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", nargs="+", default=list(FIVE), help=f"tiny families (default: {' '.join(FIVE)})")
    ap.add_argument("--prompts", type=int, default=64, help="test prompts scored and train prompts rolled out")
    ap.add_argument("--group", type=int, default=8, help="completions per rollout prompt (G)")
    ap.add_argument("--work-dir", default="runs/reproduce", help="where the SFT starts are (trained if missing)")
    ap.add_argument("--workers", type=int, default=2, help="SFT workers when a start is missing")
    ap.add_argument("--threads", type=int, default=0, help="torch threads for the study (0: all cores)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    preset = replace(PRESETS["tiny-quick"], families={f: FIVE[f] for f in args.families})
    sft = run_sft(preset, Path(args.work_dir), args.workers, progress=False)
    print(
        f"threshold decoding on the SFT'd tiny models ({platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads, {args.prompts} prompts, G = {args.group}):",
        flush=True,
    )
    rows = [r for f in args.families for r in study(f, FIVE[f], sft[f]["folder"], args.prompts, args.group)]
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "prompts": args.prompts, "group": args.group}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
