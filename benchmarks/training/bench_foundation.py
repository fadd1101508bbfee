"""Foundation figures for the tiny model on this machine, side by side in one run:
parameters, sampler tokens/s at batch 1 and 64 (with and without the trajectory record), and
masked-diffusion SFT tokens/s.

    .venv/bin/python benchmarks/training/bench_foundation.py [--threads 2]
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import time

import torch

from daca_bench.config import ModelConfig, SamplerConfig
from daca_bench.models import count_parameters, load_model
from daca_bench.rl.sampler import pad_prompts, sample
from daca_bench.train.sft import encode_completions, sft_loss


def _time(fn, repeats: int) -> float:
    fn()  # warm-up
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t0) / repeats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    adapter = load_model(ModelConfig())
    adapter.model.eval()
    print(
        f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}, {subprocess.run(['date', '-u', '+%F'], capture_output=True, text=True).stdout.strip()}"
    )
    print(f"tiny model parameters: {count_parameters(adapter.model):,}")
    print("| setting | batch | L | steps | record off tokens/s | record on tokens/s | record overhead |")
    print("|---|---|---|---|---|---|---|")
    for batch, L in ((1, 8), (64, 8), (64, 32)):
        cfg = SamplerConfig(gen_length=L, block_length=L if L <= 8 else 8, steps=L, temperature=0.9, batch_size=64)
        prompts = ["12+5-3="] * batch
        off = _time(lambda: sample(adapter, prompts, cfg, seed=0, record=False), args.repeats)
        on = _time(lambda: sample(adapter, prompts, cfg, seed=0, record=True), args.repeats)
        print(
            f"| sampler | {batch} | {L} | {L} | {batch * L / off:,.0f} | {batch * L / on:,.0f} | {100 * (on / off - 1):+.1f}% |"
        )
    adapter.model.train()
    opt = torch.optim.AdamW(adapter.model.parameters(), lr=1e-4)
    p_ids, p_mask = pad_prompts(adapter, ["12+5-3="] * 64)
    comp = encode_completions(adapter, ["14"] * 64, 8)
    gen = torch.Generator().manual_seed(0)

    def step():
        loss, _ = sft_loss(adapter, p_ids, p_mask, comp, gen, 1e-3)
        opt.zero_grad()
        loss.backward()
        opt.step()

    sec = _time(step, args.repeats * 4)
    print(f"| SFT step | 64 | 8 | - | {64 * (p_ids.shape[1] + 8) / sec:,.0f} tokens/s (prompt+completion) | | |")


if __name__ == "__main__":
    main()
