"""Evaluation throughput: prompts per second of `daca-bench eval`'s decoding (batched, with and without the
KV cache and threshold decoding) against the reference of the field's evaluation loops: the sampler called
on one prompt at a time, uncached (d1's eval loop and LLaDA's `generate` decode that way). Greedy; the
`identical` column counts the rows that equal the reference's token for token (the uncached batched path
must equal it: same settings; a cache or a threshold may change a few tokens: that is the point of the count).

    PYTHONPATH=. python -m benchmarks.decoding.bench_eval              # the tiny model and the LLaDA class, CPU
    PYTHONPATH=. python -m benchmarks.decoding.bench_eval --quick      # a toy shape: seconds (tests)
    ... --json out.json

Models: the built-in tiny model, and the native LLaDA class with random weights at a small width (the
output layer scaled as in bench_rollout_cache, so that a threshold commits a few tokens per step).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import replace

import torch

from daca_bench.config import ModelConfig, SamplerConfig
from daca_bench.models import load_model
from daca_bench.rl.sampler import sample

SHAPES = {
    "full": {
        "tiny": dict(n=32, gen=32, block=32, steps=16, batch=16),
        "llada": dict(n=16, gen=64, block=32, steps=32, batch=8),
    },
    "quick": {
        "tiny": dict(n=6, gen=8, block=8, steps=4, batch=3),
        "llada": dict(n=4, gen=8, block=4, steps=4, batch=2),
    },
}
SETTINGS = [
    ("batched", "none", None),
    ("batched, prefix cache", "prefix", None),
    ("batched, dual cache", "dual", None),
    ("batched, dual cache, threshold 0.9", "dual", 0.9),
]


def prompts(n: int) -> list[str]:
    """n arithmetic prompts of unequal lengths (left padding is exercised)."""
    return [f"Compute {3 * i + 1} + {i * i} * {i % 7 + 2} and give the number: " + "x" * (i % 5) for i in range(n)]


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def compare(name: str, adapter, shape: dict) -> list[dict]:
    """The reference loop, then each batched setting: prompts/s, speed-up, rows identical to the reference."""
    batch = prompts(shape["n"])
    cfg = SamplerConfig(
        gen_length=shape["gen"], block_length=shape["block"], steps=shape["steps"], temperature=0.0, batch_size=1
    )
    adapter.model.eval()
    sample(adapter, batch[:2], replace(cfg, batch_size=2), record=False)  # warm-up: first-call costs out of the timings
    ref, t_ref = timed(lambda: [sample(adapter, [p], cfg, record=False).completion_ids[0] for p in batch])
    rows = [
        {
            "model": name,
            "setting": "reference: one prompt at a time, uncached",
            "prompts/s": len(batch) / t_ref,
            "speed-up": 1.0,
            "identical": f"{len(batch)}/{len(batch)}",
        }
    ]
    for label, cache, threshold in SETTINGS:
        run = replace(cfg, batch_size=shape["batch"], cache=cache, threshold=threshold)
        out, t = timed(lambda: sample(adapter, batch, run, record=False).completion_ids)
        same = sum(bool(torch.equal(a, b)) for a, b in zip(out, ref))
        rows.append(
            {
                "model": name,
                "setting": f"{label} (batch {shape['batch']})",
                "prompts/s": len(batch) / t,
                "speed-up": t_ref / t,
                "identical": f"{same}/{len(batch)}",
            }
        )
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| model | setting | prompts/s | speed-up | identical to the reference |", "|---|---|---:|---:|---:|"]
    lines += [
        f"| {r['model']} | {r['setting']} | {r['prompts/s']:.2f} | {r['speed-up']:.2f}x | {r['identical']} |"
        for r in rows
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a toy shape, for the tests")
    ap.add_argument("--json", default=None, help="also write the rows as JSON")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    shapes = SHAPES["quick" if args.quick else "full"]
    from benchmarks.decoding.bench_rollout_cache import llada_adapter

    rows = compare("tiny", load_model(ModelConfig(name="tiny")), shapes["tiny"])
    sh = shapes["llada"]
    llada, _ = llada_adapter(False, None, prompts(sh["n"]), sh["gen"])
    rows += compare("LLaDA class (random, small)", llada, sh)
    print(markdown(rows))
    print(
        f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads; "
        + "; ".join(
            f"{k}: {v['n']} prompts, length {v['gen']}, block {v['block']}, {v['steps']} steps"
            for k, v in shapes.items()
        )
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
