"""Peak memory of one +DACA update (SML K = 4, DPS weights, GRPO loss, backward) on the native
LLaDA class at a toy size (hidden 64, 2 layers, vocabulary V) in bf16 on CPU, measured with
torch.profiler's memory timeline: the chunked log-prob path against an unchunked one and the
full log_softmax it replaced. The mask, eos and pad ids are put at the top of the V rows.

    PYTHONPATH=. python benchmarks/training/bench_memory.py [--vocab 32768] [--gen 64] [--prompt 32] [--g 6]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import warnings
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from daca_bench.config import LossConfig
from daca_bench.rl import likelihood
from daca_bench.rl.losses import loss_grpo
from daca_bench.testing import paper_adapter


def full_log_softmax(logits, target, chunk=None):
    """The path before chunking: a float32 copy of all logits and a full log_softmax kept for backward."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, target[..., None]).squeeze(-1)


def one_update(adapter, prompt, mask, completion, logit_chunk: int) -> None:
    n, L = completion.shape
    logp = likelihood.sml_logprobs(adapter, prompt, mask, completion, k=4, logit_chunk=logit_chunk)
    adv = torch.linspace(-1, 1, n)
    weights = torch.rand(n, L, generator=torch.Generator().manual_seed(0)) + 0.5
    loss, _ = loss_grpo(
        logp, logp.detach(), None, adv, torch.ones(n, L, dtype=torch.bool), weights, LossConfig(loss_type="bnpo")
    )
    loss.backward()


def peak_mib(fn) -> float:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        fn()
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof.export_memory_timeline(str(Path(tmp) / "t.json"), device="cpu")
        _, sizes = json.loads((Path(tmp) / "t.json").read_text())
    return max(sum(s) for s in sizes) / 2**20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--g", type=int, default=6)
    args = ap.parse_args()
    torch.set_num_threads(2)
    v = args.vocab
    adapter = paper_adapter(
        "llada",
        dtype=torch.bfloat16,
        vocab_size=v,
        embedding_size=v,
        d_model=64,
        n_layers=2,
        n_heads=4,
        n_kv_heads=4,
        mlp_hidden_size=172,
        mask_token_id=v - 1,
        eos_token_id=v - 2,
        pad_token_id=v - 2,
    )
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(4, 96, (args.g, args.prompt), generator=gen)
    mask = torch.ones_like(prompt)
    completion = torch.randint(4, 96, (args.g, args.gen), generator=gen)
    logits_mib = 4 * args.g * (args.prompt + args.gen) * args.vocab * 2 / 2**20
    print(
        f"LLaDA (native class) toy, bf16, V={args.vocab}, G={args.g}, P={args.prompt}, L={args.gen}, K=4: "
        f"the K*G canvases' bf16 logits are {logits_mib:.0f} MiB"
    )
    rows = {}
    original = likelihood.target_logprobs
    try:
        likelihood.target_logprobs = full_log_softmax
        rows["full log_softmax (before)"] = peak_mib(lambda: one_update(adapter, prompt, mask, completion, 0))
    finally:
        likelihood.target_logprobs = original
    rows["logsumexp, one chunk (logit_chunk=0)"] = peak_mib(lambda: one_update(adapter, prompt, mask, completion, 0))
    rows["logsumexp, chunked (logit_chunk=1024)"] = peak_mib(
        lambda: one_update(adapter, prompt, mask, completion, 1024)
    )
    print("| log-prob path | peak memory of one +DACA update (MiB) |\n|---|---|")
    for name, mib in rows.items():
        print(f"| {name} | {mib:.0f} |")


if __name__ == "__main__":
    main()
