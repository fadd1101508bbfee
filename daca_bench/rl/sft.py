"""Masked-diffusion SFT (the LLaDA / d1 recipe) for any adapter model.

Completion-only masking: per sequence t ~ U(eps, 1), each completion position is masked
with probability t, and the cross-entropy at masked positions is weighted by 1/t (the
ELBO's weighting), normalised by the completion length. The completion is the gold answer,
then EOS, then EOS to the canvas length L (as LLaDA pads its answers).

    daca-bench sft --config configs/tiny_sft.yaml sft.steps=500
    torchrun --nproc_per_node 8 -m daca_bench sft ...   # FSDP2 (rl/parallel.py, sft.parallel): each rank
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
import json
import math
import os
import sys
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..canvas import check, gold_lengths
from ..checkpoint import RunState, is_sharded, load_sharded, resume_point, save_checkpoint, save_sharded, write_folder
from ..errors import CheckpointError
from ..config import (
    ConfigError,
    RunConfig,
    SFTConfig,
    command_config,
    dump,
    load_config,
)
from ..models import ModelAdapter, default_device, load_model, load_pretrained
from ..runfolder import RESUMABLE_SFT, refuse_changed, set_aside
from .evaluate import evaluate, mean_reward_beside
from .parallel import Parallel
from .sampler import pad_prompts


def encode_completions(adapter: ModelAdapter, targets: list[str], length: int) -> torch.Tensor:
    """Gold answers -> (N, L) ids: answer, EOS, EOS padding. Too long an answer is an error."""
    out = torch.full((len(targets), length), adapter.eos_token_id, dtype=torch.long)
    for i, ids in enumerate(adapter.encode(targets)):
        if len(ids) >= length:
            raise ConfigError(f"gold completion {targets[i]!r} has {len(ids)} tokens; sampler.gen_length={length} "
                             "leaves no room for EOS: raise sampler.gen_length")
        out[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


def sft_loss(adapter: ModelAdapter, prompt_ids, prompt_mask, completion, gen: torch.Generator, eps: float,
             rows: slice = slice(None)):
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
    logits = adapter.logits(ids, attn)[:, prompt_ids.shape[1]:].float()  # (B, L, V)
    ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), completion.to(device), reduction="none")  # (B, L)
    weighted = ce * masked.to(device) / t[:, None].to(device)
    return weighted.sum() / (B * L), int(ids.numel())


def _schedule(optimizer, cfg: SFTConfig):
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / max(1, cfg.warmup_steps)))


def train_sft(cfg: RunConfig, out_dir: str | Path, resume: bool = True, progress: bool = True) -> dict:
    from ..registry import get_task

    s = cfg.sft
    par = Parallel.start(s.parallel, offload=s.offload)  # torchrun's world (one process: none)
    out = Path(out_dir)
    if par.rank == 0:
        out.mkdir(parents=True, exist_ok=True)
    par.check_shared(out)
    if s.batch_size % par.world:
        raise ConfigError(f"sft.batch_size={s.batch_size} must divide across {par.world} processes")
    if s.threads:
        torch.set_num_threads(s.threads)
    if resume:  # a folder written under another config is never resumed, nor relabelled
        refuse_changed(out, cfg, RESUMABLE_SFT)
    ckpt = par.broadcast_object(resume_point(out, fresh=not resume) if par.rank == 0 else None)
    adapter = load_pretrained(str(ckpt)) if ckpt and not is_sharded(ckpt) else load_model(cfg.model)
    adapter.model.to(default_device())
    par.wrap(adapter.model)
    train_task = get_task(s.task, split="train", n=s.n_train, seed=s.seed)
    train, dev = _split_dev(list(train_task.samples), s.n_dev if s.eval_every else 0, s.task)
    check(cfg.sampler, "sampler", gold_lengths(train_task, adapter.encode), s.task)  # before the first step
    dev_task = dataclasses.replace(train_task, samples=dev, split="dev")
    prompts, prompt_mask = pad_prompts(adapter, [x.prompt for x in train])
    completions = encode_completions(adapter, [x.target for x in train], cfg.sampler.gen_length)
    opt = torch.optim.AdamW(adapter.model.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    sched = _schedule(opt, s)
    run = RunState(opt, sched, len(train), s.seed)
    gen = run.generator  # also draws the masks, so a resumed run draws what an uninterrupted one would
    main = par.rank == 0
    if ckpt:
        if is_sharded(ckpt):
            load_sharded(ckpt, adapter.model, opt)
        run.restore(ckpt)
        if run.step > s.steps:
            raise CheckpointError(f"{out} is at step {run.step}, past sft.steps={s.steps}; set sft.steps to "
                                  f"{run.step} or more, or rerun with --fresh to start over")
        if main:
            truncate_metrics(out / "metrics.jsonl", run.step)
        if progress and main:
            print(f"resuming {out} from {ckpt.name} (step {run.step} of {s.steps})", file=sys.stderr)
    elif main:
        (out / "metrics.jsonl").unlink(missing_ok=True)
        (out / "summary.json").unlink(missing_ok=True)
    if main:
        dump(cfg, out / "config.json")  # on a resume too: a changed step budget is what summary.json goes with

    def checkpoint():
        if par.engine:
            save_sharded(out, adapter.model, opt, run.state_dict(optimizer=False), par, s.save_total_limit)
        else:
            save_checkpoint(out, adapter, run.state_dict(), s.save_total_limit)

    adapter.model.train()
    start_step = run.step
    bar = tqdm(total=s.steps, initial=run.step, desc=f"sft {s.task}", disable=not progress or not main, unit="step")
    tokens, t0 = 0, time.perf_counter()
    share = s.batch_size // par.world
    mine = slice(par.rank * share, (par.rank + 1) * share)  # this process's rows of every batch
    with open(out / "metrics.jsonl", "a") if main else open(os.devnull, "w") as log:
        while run.step < s.steps and not run.extra.get("stopped_early"):
            idx = run.next_batch(s.batch_size)
            p_ids, p_mask = _trim_left(prompts[idx], prompt_mask[idx])
            loss, n_tok = sft_loss(adapter, p_ids, p_mask, completions[idx], gen, s.eps, mine)
            if par.any(not torch.isfinite(loss)):  # every rank stops, not only the one that saw it
                raise FloatingPointError(f"SFT loss is {loss.item()} at step {run.step}; lower sft.lr (now {s.lr}). "
                                         "The last checkpoint is left untouched.")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(adapter.model.parameters(), s.grad_clip)
            gnorm = gnorm.full_tensor() if hasattr(gnorm, "full_tensor") else gnorm  # a DTensor under FSDP2
            opt.step()
            sched.step()
            run.step += 1
            tokens += n_tok
            mean_loss = par.all_sum(loss.detach().reshape(1).cpu()).item() / par.world  # every process's rows
            row = {"step": run.step, "loss": mean_loss, "grad_norm": float(gnorm), "lr": sched.get_last_lr()[0]}
            if s.eval_every and run.step % s.eval_every == 0:
                row["dev_accuracy"] = evaluate(adapter, dev_task, cfg.sampler, par=par)["accuracy"]
                row["elapsed_s"] = round(time.perf_counter() - t0, 1)
                run.extra["dev_accuracy"] = row["dev_accuracy"]
                if s.target_accuracy and row["dev_accuracy"] >= s.target_accuracy:
                    run.extra["stopped_early"] = True
            log.write(json.dumps(row) + "\n")
            log.flush()  # progress watchers (daca_bench.experiments.grid.jobs) read this file
            bar.update(1)
            dev = run.extra.get("dev_accuracy")  # none before the first dev check (none at all without sft.eval_every)
            bar.set_postfix(loss=f"{mean_loss:.3f}", **({"dev": f"{dev:.3f}"} if dev is not None else {}))
            if run.step % s.save_every == 0 or run.step == s.steps or run.extra.get("stopped_early"):
                checkpoint()
    if run.extra.get("stopped_early"):  # the bar ends where the run did, not at a time left for steps never run
        bar.total = run.step
        bar.refresh()
    bar.close()
    seconds = time.perf_counter() - t0
    test = get_task(s.task, split="test", n=s.n_eval, seed=s.seed)
    result = evaluate(adapter, test, cfg.sampler, n=s.n_eval, par=par)
    if par.engine:  # final/ from a fresh CPU copy holding every process's shards
        full = par.full_state(adapter.model)
        if main:
            fresh = load_model(cfg.model)
            fresh.model.load_state_dict(full)
            write_folder(out / "final", fresh.save)
        par.barrier()
    else:
        write_folder(out / "final", adapter.save)
    summary = {"task": s.task, "steps": run.step, "accuracy": result["accuracy"], **mean_reward_beside(result),
               "n_eval": result["n"],
               "statuses": result["statuses"], "dev_accuracy": run.extra.get("dev_accuracy"),
               "stopped_early": bool(run.extra.get("stopped_early")), "train_seconds": round(seconds, 2),
               "tokens_per_s": round(tokens / seconds, 1) if tokens and seconds > 0 else math.nan,
               "resumed_from_step": start_step, **({"world_size": par.world} if par.world > 1 else {})}
    if main:
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def truncate_metrics(path: Path, step: int) -> None:
    """Drop metric lines past the checkpoint a run resumes from, so no step is logged twice."""
    if path.exists():
        keep = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
        path.write_text("".join(line + "\n" for line in keep))


def _split_dev(samples: list, n_dev: int, task: str) -> tuple[list, list]:
    """The last n_dev train samples become the dev set; SFT never trains on them."""
    if n_dev <= 0:
        return samples, []
    if n_dev >= len(samples) // 2:
        raise ConfigError(f"sft.n_dev={n_dev} would take half or more of the {len(samples)} {task} train samples; "
                         "lower sft.n_dev or raise sft.n_train")
    return samples[:-n_dev], samples[-n_dev:]


def _trim_left(ids: torch.Tensor, mask: torch.Tensor):
    """Drop the columns of left padding that every row of this batch has."""
    keep = mask.any(0).nonzero()
    start = int(keep[0]) if len(keep) else ids.shape[1]
    return ids[:, start:], mask[:, start:]


# ---- CLI: `daca-bench sft` ----------------------------------------------------------------
def configure(parser) -> None:
    parser.add_argument("--config", default=None, help="YAML preset (e.g. configs/tiny_sft.yaml)")
    parser.add_argument("--output-dir", default=None, help="run folder (default: output_dir of the config)")
    parser.add_argument("--fresh", action="store_true",
                        help="start over: a run already in OUTPUT is set aside in OUTPUT/.stale/N/, never deleted")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("overrides", nargs="*", help="dotted KEY=VALUE overrides, e.g. sft.steps=500")


def run(args) -> int:
    from .parallel import barrier, init_process_group, rank_and_world

    cfg = command_config(args.overrides, ("model", "sampler", "sft", "output_dir"), base=load_config(args.config))
    out = args.output_dir or cfg.output_dir
    init_process_group()  # under torchrun: before --fresh, so that one process (rank 0) sets the run aside
    aside = set_aside(out) if args.fresh and rank_and_world()[0] == 0 else None
    if aside:
        print(f"--fresh: the earlier run in {out} is set aside in {aside}", file=sys.stderr)
    barrier()
    summary = train_sft(cfg, out, resume=not args.fresh, progress=not args.no_progress)
    if rank_and_world()[0]:
        return 0
    ran = summary["steps"] - summary["resumed_from_step"]
    speed = (f"{summary['tokens_per_s']:.0f} tokens/s" if ran else "no step left to run") + \
        (f", resumed at step {summary['resumed_from_step']}" if summary["resumed_from_step"] else "")
    early = ", stopped early at the dev target" if summary["stopped_early"] else ""
    print(f"{summary['task']}: greedy test accuracy {summary['accuracy']:.3f} on {summary['n_eval']} held-out "
          f"prompts after {summary['steps']} SFT steps ({speed}{early}); model in {out}/final")
    if summary["accuracy"] == 0:  # an RL start that answers nothing: every group's rewards are equal, no signal
        print(f"warning: the SFT model answers none of the {summary['n_eval']} test prompts correctly; RL from it "
              "sees no reward to learn from (a grid's cells would all stay at 0 %): train longer (sft.steps=...) or "
              "check the task's targets (`daca-bench tasks --show`) before a grid", file=sys.stderr)
    return 0
