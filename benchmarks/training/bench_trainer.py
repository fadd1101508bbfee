"""Time per DACA-GRPO training step on the tiny config, split by phase, for baseline, +DPS,
+SML (K = 2, 4, 8) and +DACA, side by side in one run.

    .venv/bin/python benchmarks/training/bench_trainer.py [--steps 6] [--init runs/sft-tiny/final]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
from pathlib import Path

import torch

from daca_bench.config import RLConfig, apply, load_config
from daca_bench.engine.policy import load_initial
from daca_bench.registry import get_task
from daca_bench.train.trainer import PassCounter, train_step

VARIANTS = {
    "baseline": {},
    "+DPS": {"dps.enabled": True},
    "+SML K=2": {"sml.k": 2},
    "+SML K=4": {"sml.k": 4},
    "+SML K=8": {"sml.k": 8},
    "+DACA (K=4)": {"sml.k": 4, "dps.enabled": True},
}
PHASES = ("rollout", "verify", "credit", "likelihood_old", "update")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--init", default="runs/sft-tiny/final")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    root = Path(__file__).resolve().parents[2]
    cfg = load_config(root / "configs/tiny.yaml", [], RLConfig)
    init = args.init if Path(args.init).is_dir() else ""
    cfg = apply(cfg, {"train.init": init})
    task = get_task(cfg.train.task, split="train", seed=0)
    prompts = list(task.samples)[: cfg.train.prompts_per_step]
    date = subprocess.run(["date", "-u", "+%F"], capture_output=True, text=True).stdout.strip()
    print(
        f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}, {date}; "
        f"init={init or 'random tiny'}; B={cfg.train.prompts_per_step} G={cfg.train.num_generations} "
        f"L={cfg.rollout.gen_length} T={cfg.rollout.steps}; median of {args.steps} steps after 1 warm-up"
    )
    print(
        "| variant | " + " | ".join(PHASES) + " | step s | DPS share of step | update vs baseline | step vs baseline |"
    )
    print("|---|" + "---|" * (len(PHASES) + 3))
    base_step = base_update = None
    for name, over in VARIANTS.items():
        vcfg = apply(cfg, over)
        adapter = load_initial(vcfg)
        opt = torch.optim.AdamW(adapter.model.parameters(), lr=vcfg.train.lr)
        counter = PassCounter(adapter.model)
        rows = [train_step(adapter, None, vcfg, prompts, task, s, opt, counter) for s in range(args.steps + 1)][1:]
        med = {p: statistics.median(r.get(f"seconds_{p}", 0.0) for r in rows) for p in PHASES}
        step = sum(med.values())
        base_step, base_update = base_step or step, base_update or med["update"]
        print(
            f"| {name} | "
            + " | ".join(f"{med[p]:.4f}" for p in PHASES)
            + f" | {step:.3f} | {100 * med['credit'] / step:.2f}% | {med['update'] / base_update:.2f}x"
            f" | {100 * (step / base_step - 1):+.1f}% |"
        )


if __name__ == "__main__":
    main()
