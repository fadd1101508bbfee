"""The tiny block-diffusion model (model.block_size, docs/method.md section 12) against the tiny full-attention
model, side by side in one process: rollout seconds (full attention uncached and with the prefix cache; the
block model uncached and with its exact block cache) and training-step seconds by phase (baseline K = 1 and
+DACA K = 4), in the default regime (configs/tiny.yaml: arithmetic, 8 prompts x 8 generations, canvas 8 in
8 steps; the block model decodes blocks of 4) from random weights (a step's compute does not depend on them).

    PYTHONPATH=. .venv/bin/python benchmarks/decoding/bench_block.py [--repeats 5] [--threads 1] [--block 4] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import time
from pathlib import Path

import torch

from daca_bench.config import RLConfig, apply, load_config
from daca_bench.engine.policy import load_initial
from daca_bench.registry import get_task
from daca_bench.rl.sampler import sample
from daca_bench.train.trainer import PassCounter, train_step

PHASES = ("rollout", "verify", "credit", "likelihood_old", "update")


def arms(block: int) -> dict:
    """name -> config overrides of the default regime."""
    blk = {"model.block_size": block, "rollout.block_length": block, "eval.block_length": block}
    return {
        "full, cache none": {},
        "full, cache prefix": {"rollout.cache": "prefix"},
        f"block {block}, cache none": blk,
        f"block {block}, cache block": {**blk, "rollout.cache": "block"},
    }


def rollout_seconds(cfg, prompts, repeats: int) -> float:
    adapter = load_initial(cfg)
    adapter.model.eval()
    rows = [s.prompt for s in prompts for _ in range(cfg.train.num_generations)]
    sample(adapter, rows, cfg.rollout, seed=list(range(len(rows))))  # warm-up
    times = []
    for r in range(repeats):
        tick = time.perf_counter()
        sample(adapter, rows, cfg.rollout, seed=[r * 1000 + i for i in range(len(rows))])
        times.append(time.perf_counter() - tick)
    return statistics.median(times)


def step_phases(cfg, prompts, task, repeats: int) -> dict:
    adapter = load_initial(cfg)
    opt = torch.optim.AdamW(adapter.model.parameters(), lr=cfg.train.lr)
    counter = PassCounter(adapter.model)
    rows = [train_step(adapter, None, cfg, prompts, task, s, opt, counter) for s in range(repeats + 1)][1:]
    return {p: statistics.median(r.get(f"seconds_{p}", 0.0) for r in rows) for p in PHASES}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--block", type=int, default=4)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    root = Path(__file__).resolve().parents[2]
    cfg = apply(load_config(root / "configs/tiny.yaml", [], RLConfig), {"train.init": ""})
    task = get_task(cfg.train.task, split="train", seed=0)
    prompts = list(task.samples)[: cfg.train.prompts_per_step]
    date = subprocess.run(["date", "-u", "+%F %H:%M"], capture_output=True, text=True).stdout.strip()
    print(
        f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}, {date} UTC; random tiny "
        f"weights; B={cfg.train.prompts_per_step} G={cfg.train.num_generations} L={cfg.rollout.gen_length} "
        f"T={cfg.rollout.steps}; medians of {args.repeats} after 1 warm-up"
    )
    out = {"rollout": {}, "step": {}}
    print("\n| rollout arm | seconds per rollout batch | x full, cache none |\n|---|---:|---:|")
    for name, over in arms(args.block).items():
        out["rollout"][name] = rollout_seconds(apply(cfg, over), prompts, args.repeats)
        base = out["rollout"]["full, cache none"]
        print(f"| {name} | {out['rollout'][name]:.3f} | {out['rollout'][name] / base:.2f}x |", flush=True)
    print(
        "\n| training step | "
        + " | ".join(PHASES)
        + " | step s | x full baseline |\n|---|"
        + "---:|" * (len(PHASES) + 2)
    )
    for model, over in (
        ("full", {}),
        (f"block {args.block}", {**arms(args.block)[f"block {args.block}, cache block"]}),
    ):
        for variant, extra in (
            ("baseline", {}),
            ("+DACA K=4", {"sml.k": 4, "dps.enabled": True, **({"dps.scope": "block"} if over else {})}),
        ):
            med = step_phases(apply(cfg, {**over, **extra}), prompts, task, args.repeats)
            name = f"{model}, {variant}"
            out["step"][name] = med
            step = sum(med.values())
            base = sum(out["step"]["full, baseline"].values())
            print(
                f"| {name} | " + " | ".join(f"{med[p]:.4f}" for p in PHASES) + f" | {step:.3f} | {step / base:.2f}x |",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
