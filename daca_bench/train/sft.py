"""Masked-diffusion SFT (the LLaDA / d1 recipe) for any adapter model.

Completion-only masking: per sequence t ~ U(eps, 1), each completion position is masked
with probability t, and the cross-entropy at masked positions is weighted by 1/t (the
ELBO's weighting), normalised by the completion length. The completion is the gold answer,
then EOS, then EOS to the canvas length L (as LLaDA pads its answers).

    daca-bench sft --config configs/tiny_sft.yaml sft.steps=500   # experiments/commands/sft.py
    torchrun --nproc_per_node 8 -m daca_bench sft ...   # FSDP2 (engine/parallel.py, sft.parallel): each rank
                                                        # takes batch_size / N rows of the same masks
Checkpoints (save_pretrained + optimizer/RNG/step) go to OUTPUT/checkpoint-STEP every
`sft.save_every` steps (the newest `sft.save_total_limit` are kept); running the same command
again resumes from the newest intact one.

With `sft.eval_every=N` the model is greedy-evaluated every N steps on `sft.n_dev` prompts
held out of the train split (never the test split; the generated tasks deduplicate by the
same key that splits train from test, so these are unseen instances), and
`sft.target_accuracy=0.15` stops at the first evaluation that reaches it: an SFT start that
leaves RL room to improve.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import torch

from ..adapter import ModelAdapter
from ..canvas import check, gold_lengths
from ..config import ConfigError, RunConfig, to_dict
from ..engine.checkpoint import is_sharded
from ..engine.parallel import Parallel
from ..eval.evaluate import evaluate, mean_reward_beside
from ..models import DTYPES, default_device, load_model, load_pretrained
from ..rl.sampler import pad_prompts
from ..runfolder import RESUMABLE_SFT
from .loop import Loop


def encode_completions(adapter: ModelAdapter, targets: list[str], length: int) -> torch.Tensor:
    """Gold answers -> (N, L) ids: answer, EOS, EOS padding. Too long an answer is an error."""
    out = torch.full((len(targets), length), adapter.eos_token_id, dtype=torch.long)
    for i, ids in enumerate(adapter.encode(targets)):
        if len(ids) >= length:
            raise ConfigError(
                f"gold completion {targets[i]!r} has {len(ids)} tokens; sampler.gen_length={length} "
                "leaves no room for EOS: raise sampler.gen_length"
            )
        out[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


def sft_loss(
    adapter: ModelAdapter,
    prompt_ids,
    prompt_mask,
    completion,
    gen: torch.Generator,
    eps: float,
    rows: slice = slice(None),
):
    """LLaDA SFT loss on a batch: (B, P) prompts, (B, L) completions -> scalar and token count. The
    noise is drawn for the whole batch; `rows` (a process's share under torchrun) is then scored."""
    B, L = completion.shape
    device = adapter.device
    t = eps + (1 - eps) * torch.rand(B, generator=gen)  # (B,)
    masked = torch.rand(B, L, generator=gen) < t[:, None]  # (B, L)
    t, masked, prompt_ids, prompt_mask, completion = (x[rows] for x in (t, masked, prompt_ids, prompt_mask, completion))
    B = completion.shape[0]
    noisy = torch.where(masked, torch.full_like(completion, adapter.mask_token_id), completion)
    ids = torch.cat([prompt_ids, noisy], dim=1).to(device)
    attn = torch.cat([prompt_mask, torch.ones_like(completion)], dim=1).to(device)
    # a block model reads each block's clean earlier blocks from a second stream (SDAR's objective, archs/block.py)
    logits = adapter.logits(ids, attn, clean=completion.to(device))[:, prompt_ids.shape[1] :].float()  # (B, L, V)
    ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), completion.to(device), reduction="none")  # (B, L)
    weighted = ce * masked.to(device) / t[:, None].to(device)
    return weighted.sum() / (B * L), int(ids.numel())


def train_sft(cfg: RunConfig, out_dir: str | Path, resume: bool = True, progress: bool = True) -> dict:
    """An SFT run in `out_dir` on the shared run loop (train/loop.py): the model, the gold completions,
    the step, dev evaluation with its early stop, and the final greedy test."""
    from ..registry import get_task

    s = cfg.sft
    par = Parallel.start(s.parallel, offload=s.offload)  # torchrun's world (one process: none)
    if s.batch_size % par.world:
        raise ConfigError(f"sft.batch_size={s.batch_size} must divide across {par.world} processes")
    loop = Loop.open(cfg, "sft", out_dir, resume, RESUMABLE_SFT, par, progress)
    ckpt = loop.ckpt
    adapter = load_pretrained(str(ckpt)) if ckpt and not is_sharded(ckpt) else load_model(cfg.model)
    adapter.model.to(default_device())
    par.wrap(adapter.model)
    train_task = get_task(s.task, split="train", n=s.n_train, seed=s.seed, protocol=s.protocol)
    train, dev = _split_dev(list(train_task.samples), s.n_dev if s.eval_every else 0, s.task)
    check(cfg.sampler, "sampler", gold_lengths(train_task, adapter.encode), s.task)  # before the first step
    dev_task = dataclasses.replace(train_task, samples=dev, split="dev")
    prompts, prompt_mask = pad_prompts(adapter, [x.prompt for x in train])
    completions = encode_completions(adapter, [x.target for x in train], cfg.sampler.gen_length)
    run = loop.optimiser(adapter, adapter.model.parameters(), len(train))
    gen = run.generator  # also draws the masks, so a resumed run draws what an uninterrupted one would
    loop.write_config(to_dict(cfg))
    adapter.model.train()
    tokens, t0 = 0, time.perf_counter()
    share = s.batch_size // par.world
    mine = slice(par.rank * share, (par.rank + 1) * share)  # this process's rows of every batch

    def step(idx: list[int]) -> dict:
        nonlocal tokens
        p_ids, p_mask = _trim_left(prompts[idx], prompt_mask[idx])
        loss, n_tok = sft_loss(adapter, p_ids, p_mask, completions[idx], gen, s.eps, mine)
        if par.any(not torch.isfinite(loss)):  # every rank stops, not only the one that saw it
            raise FloatingPointError(
                f"SFT loss is {loss.item()} at step {run.step}; lower sft.lr (now {s.lr}). "
                "The last checkpoint is left untouched."
            )
        run.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(adapter.model.parameters(), s.grad_clip)
        gnorm = gnorm.full_tensor() if hasattr(gnorm, "full_tensor") else gnorm  # a DTensor under FSDP2
        run.optimizer.step()
        at = loop.advance()
        tokens += n_tok
        mean_loss = par.all_sum(loss.detach().reshape(1).cpu()).item() / par.world  # every process's rows
        row = {"step": at["step"], "loss": mean_loss, "grad_norm": float(gnorm), "lr": at["lr"]}
        if s.eval_every and run.step % s.eval_every == 0:
            row["dev_accuracy"] = evaluate(adapter, dev_task, cfg.sampler, par=par)["accuracy"]
            row["elapsed_s"] = round(time.perf_counter() - t0, 1)
            run.extra["dev_accuracy"] = row["dev_accuracy"]
            if s.target_accuracy and row["dev_accuracy"] >= s.target_accuracy:
                run.extra["stopped_early"] = True
        return row

    def postfix(row: dict) -> dict:
        dev = run.extra.get("dev_accuracy")  # none before the first dev check (none at all without sft.eval_every)
        return {"loss": f"{row['loss']:.3f}", **({"dev": f"{dev:.3f}"} if dev is not None else {})}

    with loop.running(f"sft {s.task}"):
        stopped = loop.steps(s.batch_size, step, postfix, done=lambda: bool(run.extra.get("stopped_early")))
        if stopped:
            return stopped
        seconds = time.perf_counter() - t0
        test = get_task(s.task, split="test", n=s.n_eval, seed=s.seed, protocol=s.protocol)
        result = evaluate(adapter, test, cfg.sampler, n=s.n_eval, par=par)
        summary = {
            "task": s.task,
            "steps": run.step,
            "accuracy": result["accuracy"],
            **mean_reward_beside(result),
            "n_eval": result["n"],
            "statuses": result["statuses"],
            "dev_accuracy": run.extra.get("dev_accuracy"),
            "stopped_early": bool(run.extra.get("stopped_early")),
            "train_seconds": round(seconds, 2),
            "tokens_per_s": round(tokens / seconds, 1) if tokens and seconds > 0 else math.nan,
            "resumed_from_step": loop.start_step,
            **({"world_size": par.world} if par.world > 1 else {}),
        }
        return loop.finish(summary, fresh=lambda: load_model(cfg.model), stream=DTYPES.get(cfg.model.dtype))


def _split_dev(samples: list, n_dev: int, task: str) -> tuple[list, list]:
    """The last n_dev train samples become the dev set; SFT never trains on them."""
    if n_dev <= 0:
        return samples, []
    if n_dev >= len(samples) // 2:
        raise ConfigError(
            f"sft.n_dev={n_dev} would take half or more of the {len(samples)} {task} train samples; "
            "lower sft.n_dev or raise sft.n_train"
        )
    return samples[:-n_dev], samples[-n_dev:]


def _trim_left(ids: torch.Tensor, mask: torch.Tensor):
    """Drop the columns of left padding that every row of this batch has."""
    keep = mask.any(0).nonzero()
    start = int(keep[0]) if len(keep) else ids.shape[1]
    return ids[:, start:], mask[:, start:]
