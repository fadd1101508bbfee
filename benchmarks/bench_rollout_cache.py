"""Rollout wall-clock of `sampler.cache` = none / prefix / dual, with and without
`threshold`, side by side in one process, against a reference `generate` written the way
LLaDA's published one is (block-wise, float64 softmax over the whole canvas, top-k commits, no
record, no cache). Two models: the native LLaDA class with random weights at the paper's
rollout shape (completion 256, blocks of 32, 128 steps) and the tiny default.

    PYTHONPATH=. python -m benchmarks.bench_rollout_cache            # CPU: LLaDA class at a small width
    PYTHONPATH=. python3 -m benchmarks.bench_rollout_cache --gpu     # CUDA: LLaDA-8B's full shape, bf16
    ... --json out.json    (rows as JSON too)     --quick    (a toy canvas: seconds, for the tests)
    ... --gap --tiny-model runs/sft-tiny/final    (the cached record against the causal likelihood)
    ... --prompt-lens 200 512 1024    (the LLaDA class at longer prompts too: none / prefix / dual)

Random weights give near-uniform predictions, under which a confidence threshold never passes;
so the output layer's weights are scaled (`calibrate`: a mean top probability of 0.6 over a
fresh canvas, or `--logit-scale`), and the threshold then commits a few tokens per step, as a
trained model's does. The same scaled model runs every setting.
`identical` counts reference rows the uncached sampler reproduces token for token (greedy).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from dataclasses import replace

import torch

from daca_bench.config import ModelConfig, SamplerConfig
from daca_bench.models import ModelAdapter, count_parameters, load_model
from daca_bench.rl.sampler import pad_prompts, sample

# CPU: a small width, and a vocabulary cut to 1,024 so that the output layer is ~7 % of the work per
# position, as LLaDA-8B's (4096 x 126,464 against 32 layers) is
CPU_LLADA = dict(d_model=256, n_heads=4, n_kv_heads=4, n_layers=4, mlp_hidden_size=768, vocab_size=1024,
                 embedding_size=1024)
SHAPES = {"paper": dict(prompt=200, gen=256, block=32, steps=128, rows=1),
          "quick": dict(prompt=16, gen=16, block=4, steps=8, rows=2),
          "tiny": dict(prompt=None, gen=32, block=8, steps=32, rows=64)}
SETTINGS = [(c, th) for th in (None, 0.9) for c in ("none", "prefix", "dual")]


@torch.no_grad()
def reference_generate(adapter: ModelAdapter, prompt_ids, prompt_mask, gen: int, block: int, steps: int):
    """LLaDA's `generate` at temperature 0 with low-confidence remasking, rewritten here: per block an
    even split of its masks over its steps; each step one full forward, float64 softmax of every
    position, the most probable token per masked position, the top-k confident in the block committed."""
    x = torch.cat([prompt_ids, torch.full((len(prompt_ids), gen), adapter.mask_token_id, device=prompt_ids.device)], 1)
    attn = torch.cat([prompt_mask, torch.ones_like(x[:, prompt_ids.shape[1]:])], 1)
    p, per_block = prompt_ids.shape[1], steps // (gen // block)
    for b in range(gen // block):
        end = p + (b + 1) * block
        left = (x[:, p + b * block:end] == adapter.mask_token_id).sum(1)  # (N,)
        quota = (left[:, None] // per_block).repeat(1, per_block)
        quota += torch.arange(per_block, device=x.device)[None] < (left % per_block)[:, None]
        for i in range(per_block):
            masked = x == adapter.mask_token_id  # (N, S)
            logits = adapter.logits(x, attn)  # (N, S, V)
            probs = torch.softmax(logits.double(), dim=-1)
            x0 = logits.argmax(-1)
            conf = probs.gather(-1, x0[..., None]).squeeze(-1)  # (N, S) float64
            conf[:, end:] = -torch.inf
            conf = torch.where(masked, conf, -torch.inf)
            x0 = torch.where(masked, x0, x)
            for r in range(len(x)):
                k = int(quota[r, i])
                if k:
                    idx = conf[r].topk(k).indices
                    x[r, idx] = x0[r, idx]
    return x[:, p:]


@torch.no_grad()
def calibrate(adapter: ModelAdapter, prompts, gen: int, target: float = 0.6) -> float:
    """The output-layer scale s at which the mean top probability over a fresh canvas's masked
    positions is `target` (one forward pass: logits scale linearly with s)."""
    ids, mask = pad_prompts(adapter, prompts[:1])
    x = torch.cat([ids, torch.full((1, gen), adapter.mask_token_id)], 1).to(adapter.device)
    attn = torch.cat([mask, torch.ones((1, gen), dtype=torch.long)], 1).to(adapter.device)
    logits = adapter.logits(x, attn)[0, ids.shape[1]:].float()  # (gen, V)
    lo, hi = 1.0, 1e5
    for _ in range(40):  # bisection on a log scale
        mid = (lo * hi) ** 0.5
        conf = torch.softmax(logits * mid, -1).amax(-1).mean()
        lo, hi = (mid, hi) if conf < target else (lo, mid)
    return round(hi, 1)


def llada_adapter(gpu: bool, scale: float | None, prompts=None, gen: int = 0) -> tuple[ModelAdapter, float]:
    """The native LLaDA class, random weights: LLaDA-8B's shape in bf16 on CUDA, CPU_LLADA on the CPU;
    the output layer scaled by `scale` (None: `calibrate`d; see the module docstring)."""
    from benchmarks.gpu_models import build

    device = torch.device("cuda" if gpu else "cpu")
    if gpu:
        adapter = build("llada", False, device)
    else:  # the character tokenizer of the tiny model; its [MASK], [EOS] = [PAD] ids
        from daca_bench.archs import LLaDAConfig, LLaDAModelLM
        from daca_bench.models import build_char_tokenizer

        tok = build_char_tokenizer()
        torch.manual_seed(0)
        model = LLaDAModelLM(LLaDAConfig(**CPU_LLADA, mask_token_id=tok.mask_token_id, eos_token_id=tok.eos_token_id,
                                         pad_token_id=tok.eos_token_id))
        adapter = ModelAdapter(model, tok, tok.mask_token_id, tok.eos_token_id, tok.eos_token_id, source="llada-random")
    adapter.model.eval()
    scale = scale or calibrate(adapter, prompts, gen)
    with torch.no_grad():
        adapter.model.get_output_embeddings().weight.mul_(scale)
    return adapter, scale


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn):
    _sync()
    tick = time.perf_counter()
    out = fn()
    _sync()
    return out, time.perf_counter() - tick


def compare(name: str, adapter: ModelAdapter, prompts, shape: dict, reference: bool = True,
            settings=SETTINGS) -> list[dict]:
    """One row per setting: seconds, forward passes, tokens/s, speed-up over the uncached sampler
    (`settings` starts with the uncached one)."""
    base = SamplerConfig(gen_length=shape["gen"], block_length=shape["block"], steps=shape["steps"],
                         temperature=0.0, batch_size=len(prompts))
    sample(adapter, prompts[:1], replace(base, gen_length=shape["block"], steps=shape["steps"] // (shape["gen"] // shape["block"])))  # warm-up
    rows, uncached, ref_ids = [], None, None
    if reference:
        ids, mask = pad_prompts(adapter, prompts)
        dev = adapter.device
        ref_ids, secs = timed(lambda: reference_generate(adapter, ids.to(dev), mask.to(dev), shape["gen"],
                                                         shape["block"], shape["steps"]))
        rows.append({"model": name, "setting": "reference generate (no record)", "seconds": secs,
                     "passes": shape["steps"]})
        print(f"  {name} reference generate: {secs:.2f} s", flush=True)
    for cache, th in settings:
        batch, secs = timed(lambda: sample(adapter, prompts, replace(base, cache=cache, threshold=th), seed=0))
        row = {"model": name, "setting": f"cache={cache}" + (f", threshold={th}" if th else ""), "seconds": secs,
               "passes": batch.forward_passes}
        if cache == "none" and th is None:
            uncached = secs
            if ref_ids is not None:
                row["identical"] = f"{int((batch.completion_ids == ref_ids.cpu()).all(1).sum())}/{len(prompts)}"
        rows.append(row)
        print(f"  {name} {row['setting']}: {secs:.2f} s, {row['passes']} passes", flush=True)
    for row in rows:
        row["tokens_per_s"] = round(len(prompts) * shape["gen"] / row["seconds"], 1)
        row["speedup"] = round(uncached / row["seconds"], 2)
        row["seconds"] = round(row["seconds"], 3)
    return rows


def gap(name: str, adapter: ModelAdapter, prompts, shape: dict, temperature: float = 0.9) -> list[dict]:
    """Per cache setting: |causal likelihood at K = steps - commit_logp| per token (mean, and over
    tokens committed after a block's first step), the mean per-sequence sum of the differences, and
    the tokens a cached rollout shares with the uncached one of the same seed."""
    from daca_bench.rl.sampler import replay_commit_logp

    base = SamplerConfig(gen_length=shape["gen"], block_length=shape["block"], steps=shape["steps"],
                         temperature=temperature, batch_size=len(prompts))
    per_block = shape["steps"] // (shape["gen"] // shape["block"])
    ref = sample(adapter, prompts, base, seed=0)
    rows = []
    for cache in ("none", "prefix", "dual"):
        batch = sample(adapter, prompts, replace(base, cache=cache), seed=0)
        diff = replay_commit_logp(adapter, batch) - batch.trajectory.commit_logp  # (N, L)
        later = (batch.trajectory.commit_step - 1) % per_block != 0
        rows.append({"model": name, "setting": f"cache={cache}", "mean_abs_gap": round(float(diff.abs().mean()), 4),
                     "mean_abs_gap_later_steps": round(float(diff[later].abs().mean()), 4),
                     "mean_seq_sum_gap": round(float(diff.sum(1).mean()), 3),
                     "mean_commit_logp": round(float(batch.trajectory.commit_logp.mean()), 3),
                     "same_tokens_as_none": round(float((batch.completion_ids == ref.completion_ids).float().mean()), 3)})
    return rows


def markdown(rows: list[dict]) -> str:
    cols = list(rows[0]) if "mean_abs_gap" in rows[0] else \
        ["model", "setting", "seconds", "passes", "tokens_per_s", "speedup", "identical"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", action="store_true", help="CUDA: LLaDA-8B's full shape in bf16 (the tiny model skipped)")
    ap.add_argument("--quick", action="store_true", help="a toy canvas (seconds)")
    ap.add_argument("--logit-scale", type=float, default=None,
                    help="output-layer scale (default: calibrated to a mean top probability of 0.6)")
    ap.add_argument("--tiny-model", default="tiny", help="the tiny model: tiny (random) or a trained save_pretrained folder")
    ap.add_argument("--rows", type=int, default=None, help="rollouts at the paper shape (default 4 on CUDA, 1 on the CPU)")
    ap.add_argument("--gap", action="store_true", help="measure commit_logp against the causal likelihood instead")
    ap.add_argument("--prompt-lens", type=int, nargs="+", default=None, metavar="P",
                    help="prompt lengths for the LLaDA class (default: the paper shape's 200); every length after "
                         "the first runs cache none / prefix / dual only, threshold off, no reference")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.gpu and not torch.cuda.is_available():
        raise SystemExit("--gpu needs CUDA")
    shape = dict(SHAPES["quick" if args.quick else "paper"])
    if not args.quick:
        shape["rows"] = args.rows or (4 if args.gpu else 1)
    lens = args.prompt_lens or [shape["prompt"]]
    shape["prompt"] = lens[0]
    text = ("Answer with the number only. " * 20)[: shape["prompt"]]
    llada, scale = llada_adapter(args.gpu, args.logit_scale, [text], shape["gen"])
    print(f"{platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, torch "
          f"{torch.__version__}, threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.1f}; LLaDA class "
          f"{count_parameters(llada.model) / 1e6:.1f}M parameters, logit scale {scale}", flush=True)
    if args.gap:  # the likelihood gap instead of the timings
        rows = gap("llada", llada, [text] * 2, SHAPES["quick"] if args.quick else dict(shape, gen=64, steps=32))
        from daca_bench.registry import get_task

        tiny = load_model(ModelConfig(name=args.tiny_model))
        tiny.model.eval()
        prompts = [s.prompt for s in get_task("arithmetic", split="test", n=64).samples][:64]
        rows += gap("tiny", tiny, prompts, SHAPES["quick"] if args.quick else SHAPES["tiny"])
        print(markdown(rows))
        return 0
    rows = compare("llada", llada, [text] * shape["rows"], shape)
    for p in lens[1:]:  # the prefix cache's gain grows with the prompt (BENCHMARKS.md: 2.79x at most at 200)
        longer = ("Answer with the number only. " * (p // 28 + 1))[:p]
        rows += compare(f"llada P={p}", llada, [longer] * shape["rows"], dict(shape, prompt=p), reference=False,
                        settings=[(c, None) for c in ("none", "prefix", "dual")])
    if not args.gpu:
        from daca_bench.registry import get_task

        tiny = load_model(ModelConfig(name=args.tiny_model))
        tiny.model.eval()
        t = SHAPES["quick" if args.quick else "tiny"]
        prompts = [s.prompt for s in get_task("arithmetic", split="test", n=t["rows"]).samples][: t["rows"]]
        rows += compare("tiny", tiny, prompts, t)
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
