"""The DACA-GRPO trainer: one loop for GRPO, GSPO, REINFORCE++ and the field's bases (rl/bases/), with DPS and SML.

    daca-bench train --config configs/tiny.yaml train.init=runs/sft-tiny/final dps.enabled=true sml.k=4

Each step reads top to bottom: sample G completions per prompt with the trajectory record ->
verify -> advantages -> DPS weights -> log-probs under the old policy (and the reference when
beta > 0) -> mu inner updates -> log -> periodic greedy evaluation -> checkpoint.
Under `torchrun --nproc_per_node N` every process takes B/N of the prompts and gradients are
averaged across processes (gloo on CPU, nccl on GPU).
"""
from __future__ import annotations

import copy
import json
import math
import os
import signal
import sys
import time
from collections import Counter
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..canvas import check_rl
from ..checkpoint import RunState, resume_point, save_checkpoint, write_folder
from ..config import ConfigError, RLConfig, pick, to_dict
from ..errors import CheckpointError
from ..jsonl import column_means
from ..loaders import data_files_given
from ..models import default_device, require_available, task_prompts
from ..runfolder import RESUMABLE_RL, refuse_changed
from .bases import check as check_base
from .bases import estimator_for, fresh_masks, ratio_free
from .credit import dps_weights, weight_stats
from .evaluate import eval_task, evaluate, score, write_eval_records
from .guards import Guard, any_process, collapse_stats
from .likelihood import STRATA, keyed_generator, sml_logprobs
from .losses import ADVANTAGES, AGGREGATIONS, LOSSES
from .memory import enable_gradient_checkpointing, out_of_memory, sml_chunk
from .policy import disable_dropout, load_initial, load_policy
from .reporters import open_reporters, reporter_names
from .runtime import (
    PRECISIONS,
    allreduce_grads,
    autocast,
    gather_rewards,
    git_describe,
    init_distributed,
    is_main_thread,
    precision_record,
    rank_and_world,
    versions,
)
from .sampler import sample
from .sft import truncate_metrics


class PassCounter:
    """Counts forward passes of a model (a forward pre-hook) per phase."""

    def __init__(self, model):
        self.counts = Counter()
        self.phase = "other"
        model.register_forward_pre_hook(lambda *_: self.counts.update([self.phase]))

    @contextmanager
    def __call__(self, phase):
        prev, self.phase = self.phase, phase
        yield
        self.phase = prev


def _seed(*key) -> int:
    return int(keyed_generator(*key).initial_seed() % (2**62))


def validate(cfg: RLConfig) -> None:
    check_rl(cfg)  # every canvas, before the first step
    pick(LOSSES, cfg.loss.base, "loss.base")
    check_base(cfg)
    pick(AGGREGATIONS, cfg.loss.loss_type, "loss.loss_type")
    pick(STRATA, cfg.sml.partition, "sml.partition")
    from .credit import NORMS, SCORES

    pick(SCORES, cfg.dps.score, "dps.score")
    pick(NORMS, cfg.dps.norm, "dps.norm")
    reporter_names(cfg.train.report_to)
    pick(REWARDS, cfg.train.reward, "train.reward")
    pick(PRECISIONS, cfg.train.precision, "train.precision")
    _, world = rank_and_world()
    if cfg.train.prompts_per_step % world:
        raise ConfigError(f"train.prompts_per_step={cfg.train.prompts_per_step} must divide across {world} processes")


def train(cfg: RLConfig, out_dir: str | Path, resume: bool = True, progress: bool = True) -> dict:
    init_distributed()
    validate(cfg)
    rank, world = rank_and_world()
    t = cfg.train
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if t.threads:
        torch.set_num_threads(t.threads)
    require_available(cfg.model if not t.init else replace(cfg.model, name=t.init), t.require_gpu)
    if resume:  # a folder written under another config is never resumed, nor relabelled
        refuse_changed(out, cfg, RESUMABLE_RL)
    ckpt = resume_point(out, fresh=not resume)
    device = default_device()
    adapter = load_policy(cfg, ckpt)
    adapter.model.to(device)
    if t.gradient_checkpointing:
        enable_gradient_checkpointing(adapter.model)
    if t.disable_dropout:  # old, current and reference passes then agree: the first inner ratio is exactly 1
        disable_dropout(adapter.model)
    reference = None
    if cfg.loss.beta > 0:  # with LoRA the reference is the adapter-disabled base model
        reference = adapter if t.lora else load_initial(cfg)
        if reference is not adapter:
            reference.model.to(device).eval().requires_grad_(False)
    counter = PassCounter(adapter.model)
    train_task = training_task(cfg)
    test_task = eval_task(cfg, adapter)  # one fixed set for every cell, built as reproduce builds the start's
    if t.chat_template or t.max_prompt_length:  # d1: one user message of the chat template (+ prefill);
        train_task = _chat_task(adapter, train_task, t.chat_template, t.max_prompt_length)  # train prompts cut
    samples = list(train_task.samples)
    trainable = [p for p in adapter.model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=t.lr, betas=(t.adam_beta1, t.adam_beta2), weight_decay=t.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, t.warmup_steps)))
    run = RunState(opt, sched, len(samples), t.seed)
    if ckpt:
        run.restore(ckpt)
        if run.step > t.steps:
            raise CheckpointError(f"{out} is at step {run.step}, past train.steps={t.steps}; set train.steps to "
                                  f"{run.step} or more, or rerun with --fresh to start over")
        if rank == 0:
            truncate_metrics(out / "metrics.jsonl", run.step)
    elif rank == 0:
        (out / "metrics.jsonl").unlink(missing_ok=True)
        (out / "summary.json").unlink(missing_ok=True)
    if rank == 0:  # on a resume too: a changed step budget or thread count is what summary.json goes with
        given = data_files_given()  # --data-file: the local files a hub task was read from
        (out / "config.json").write_text(json.dumps({**to_dict(cfg), "git": git_describe(), "versions": versions(),
                                                     "world_size": world, **precision_record(device, t.precision),
                                                     **({"data_files": given} if given else {})}, indent=2) + "\n")
    stop = {"signal": None}
    old_handlers = {s: signal.signal(s, lambda num, _: stop.update(signal=num)) for s in (signal.SIGTERM, signal.SIGINT)} \
        if rank == 0 and is_main_thread() else {}

    def checkpoint():
        if rank == 0:
            save_checkpoint(out, adapter, run.state_dict(), t.save_total_limit)

    bar = tqdm(total=t.steps, initial=run.step, desc=f"train {cfg.loss.base} {t.task}", disable=not progress or rank > 0)
    log = open(out / "metrics.jsonl", "a") if rank == 0 else None
    board = open_reporters(t.report_to, out, to_dict(cfg)) if rank == 0 else None
    guard = Guard(cfg.guard)  # collapse guards (rl/guards.py)
    try:
        while run.step < t.steps and stop["signal"] is None:
            idx = run.next_batch(t.prompts_per_step)
            per_rank = t.prompts_per_step // world
            my = idx[rank * per_rank:(rank + 1) * per_rank]
            try:
                metrics = train_step(adapter, reference, cfg, [samples[i] for i in my], train_task, run.step, opt,
                                     counter, first_prompt=rank * per_rank)
            except torch.OutOfMemoryError as exc:
                raise out_of_memory(run.step, exc) from None
            sched.step()
            run.step += 1
            step = run.step
            metrics.update(step=step, lr=sched.get_last_lr()[0])
            if t.eval_every and step % t.eval_every == 0 and step < t.steps:
                metrics["test_accuracy"] = evaluate(adapter, test_task, cfg.eval, n=t.n_eval)["accuracy"]
            if log:
                log.write(json.dumps(metrics) + "\n")
                if board:
                    board.log(metrics, step)
                log.flush()
            bar.update(1)
            bar.set_postfix(reward=f"{metrics['reward_mean']:.3f}", loss=f"{metrics['loss']:.4f}")
            if any_process(guard.tripped(metrics, step)):  # guard.action=stop: checkpoint and stop
                checkpoint()
                return {"stopped": True, "step": run.step, "guard": guard.message}
            if step % t.save_every == 0 or stop["signal"] is not None:
                checkpoint()
        if stop["signal"] is not None:
            checkpoint()
            print(f"stopped by signal {stop['signal']} at step {run.step}; checkpoint saved, rerun to resume",
                  file=sys.stderr)
            return {"stopped": True, "step": run.step}
        checkpoint()
        result = evaluate(adapter, test_task, cfg.eval, n=t.n_eval)
        if rank == 0:
            write_eval_records(out / "eval.jsonl", result)
        summary = {"task": t.task, "base": cfg.loss.base, "dps": cfg.dps.enabled, "dps_score": cfg.dps.score,
                   "sml_k": cfg.sml.k, "sml_partition": cfg.sml.partition,
                   "steps": run.step, "test_accuracy": result["accuracy"], "n_eval": result["n"],
                   **({"test_accuracy_d1": result["accuracy_d1"]} if "accuracy_d1" in result else {}),
                   "eval_split": t.eval_split, **(regime_means(out / "metrics.jsonl") if rank == 0 else {}),
                   "statuses": result["statuses"], "forward_passes": dict(counter.counts)}
        if rank == 0:
            write_dps_examples(adapter, cfg, samples[:4], train_task, out / "dps_examples.json")
            final = replace(adapter, model=copy.deepcopy(adapter.model).merge_and_unload()) if t.lora else adapter
            write_folder(out / "final", final.save)
            tmp = out / "summary.json.tmp"
            tmp.write_text(json.dumps(summary, indent=2) + "\n")
            os.replace(tmp, out / "summary.json")
        return summary
    finally:
        bar.close()
        if log:
            log.close()
        if board:
            board.close()
        for s, h in old_handlers.items():
            signal.signal(s, h)


def write_dps_examples(adapter, cfg: RLConfig, prompts, task, path: Path) -> None:
    """A few real completions with their tokens and DPS weights (for the DPS picture), even
    when this run trained without DPS: the weights are what DPS would have given them."""
    adapter.model.eval()
    batch = sample(adapter, [s.prompt for s in prompts], cfg.rollout, seed=_seed(cfg.train.seed, "examples"))
    dps = replace(cfg.dps, enabled=True)
    w = dps_weights(batch.trajectory, batch.completion_mask, dps, seed=cfg.train.seed)
    rows = []
    for i, s in enumerate(prompts):
        n = int(batch.completion_mask[i].sum())
        ids = batch.completion_ids[i, :n].tolist()
        rows.append({"prompt": s.prompt, "completion": batch.texts[i], "reward": task.verify(s, batch.texts[i]).as_json_value(),
                     "tokens": [adapter.decode_token(t) for t in ids], "weights": w[i, :n].tolist(),
                     "commit_step": batch.trajectory.commit_step[i, :n].tolist(), "score": dps.score})
    path.write_text(json.dumps(rows, indent=2) + "\n")


def regime_means(path: Path) -> dict:
    """The run's mean clip fraction and k3 KL (what a reader needs to know whether the ratio, the
    clip and the KL term acted), from metrics.jsonl."""
    means = column_means(path, ("clip_frac", "kl"))
    return {f"{k}_mean": v for k, v in means.items() if not math.isnan(v)}


REWARDS = {"exact": None, "dense": "dense", "d1": "d1"}  # train.reward -> the task's `shaping`


def training_task(cfg: RLConfig):
    """The train split with the reward RL trains on: exact match, or the task's dense partial
    credit / d1 shaping (the test split is always scored by exact match)."""
    from ..registry import get_task

    t = cfg.train
    shaping = pick(REWARDS, t.reward, "train.reward")
    kw = {"shaping": shaping} if shaping else {}
    try:
        return get_task(t.task, split="train", n=t.n_train, seed=t.seed, **kw)
    except (TypeError, ValueError) as exc:
        if not shaping:
            raise
        raise ConfigError(f"train.reward={t.reward}: task {t.task!r} has no such reward ({exc}); "
                          "use train.reward=exact") from None


def _chat_task(adapter, task, chat: bool = True, max_tokens: int = 0):
    wrapped = task_prompts(adapter, task.samples, chat, max_tokens)
    return replace(task, samples=[replace(s, prompt=p) for s, p in zip(task.samples, wrapped)])


def train_step(adapter, reference, cfg: RLConfig, prompts, task, step: int, opt, counter, first_prompt: int = 0) -> dict:
    """One rollout batch and its mu inner updates; returns the step's metrics."""
    t, G = cfg.train, cfg.train.num_generations
    timer, passes_before = {}, Counter(counter.counts)
    tick = time.perf_counter()
    # 1. rollouts with the trajectory record; one seed per sequence, so batches split across processes agree
    rows = [s for s in prompts for _ in range(G)]
    seq_ids = [(step, first_prompt + i // G, i % G) for i in range(len(rows))]
    adapter.model.eval()
    with counter("rollout"), autocast(adapter.device, t.precision):
        batch = sample(adapter, [s.prompt for s in rows], cfg.rollout, seed=[_seed(t.seed, "rollout", *k) for k in seq_ids])
    timer["rollout"] = time.perf_counter() - tick
    # 2. verify (an infrastructure failure is NaN and stays out of the group statistics)
    tick = time.perf_counter()
    scored = score(task, rows, batch.texts)
    rewards = torch.tensor([r.value if r.scored else math.nan for r in scored["rewards"]], dtype=torch.float32)
    timer["verify"] = time.perf_counter() - tick
    # 3. advantages over groups (all processes' rewards when the method normalises over the batch)
    all_r = gather_rewards(rewards).view(-1, G)
    adv_all = ADVANTAGES[cfg.loss.base](all_r, cfg.loss)
    rank, world = rank_and_world()
    adv = adv_all.view(world, -1)[rank] if world > 1 else adv_all
    # 4. DPS weights from the record: constants, no forward pass
    tick = time.perf_counter()
    valid = batch.completion_mask
    weights = dps_weights(batch.trajectory, valid, cfg.dps, seq_ids=seq_ids, seed=t.seed, warn_disabled=False)
    timer["credit"] = time.perf_counter() - tick
    # 5. old and reference log-probs, one mask draw per inner iteration
    tick = time.perf_counter()
    est = dict(k=cfg.sml.k, partition=cfg.sml.partition, seq_ids=seq_ids, seed=t.seed,
               p_mask_prompt=cfg.sml.p_mask_prompt, commit_step=batch.trajectory.commit_step,
               chunk=sml_chunk(adapter, cfg, batch.prompt_ids.shape[1] + batch.completion_ids.shape[1]),
               logit_chunk=cfg.sml.logit_chunk, valid=batch.completion_mask)
    lik = estimator_for(cfg) or sml_logprobs  # the base's own likelihood (rl/bases/), or SML
    args = (batch.prompt_ids, batch.prompt_mask, batch.completion_ids)
    # the same precision and mode as the update, so that the first inner step has ratio exactly 1
    adapter.model.train()
    # the distinct mask draws: one per inner iteration, or one for all when every iteration sees the same canvases
    draws = 1 if same_masks(cfg) else t.mu
    with torch.no_grad(), counter("likelihood_old"), autocast(adapter.device, t.precision, grad=True):
        # draw 0 needs none: inner 0's own pass, detached, is its old policy (same weights, masks, mode and precision)
        # a ratio-free base (wd1, spg) never reads the old policy: no old passes
        old = [None] * draws if ratio_free(cfg) else [None] + [lik(adapter, *args, inner=i, **est) for i in range(1, draws)]
        with (reference.model.disable_adapter() if reference is adapter else nullcontext()):
            ref = [lik(reference, *args, inner=i, **est) for i in range(draws)] if reference is not None else None
    timer["likelihood_old"] = time.perf_counter() - tick
    # 6. mu inner updates
    tick = time.perf_counter()
    device = adapter.device
    adv, weights, valid = adv.to(device), weights.to(device), valid.to(device)
    loss_fn = LOSSES[cfg.loss.base]
    micro = _split(len(rows), t.grad_accum)
    stats, losses, gnorm = Counter(), [], 0.0
    first: dict[int, torch.Tensor] = {}  # inner 0's own log-probs per micro-batch: draw 0's old policy
    for i in range(t.mu):
        opt.zero_grad(set_to_none=True)
        for sl in micro:
            sub_est = {**est, "seq_ids": seq_ids[sl], "commit_step": est["commit_step"][sl], "valid": est["valid"][sl]}
            with counter("likelihood"), autocast(device, t.precision, grad=True):
                logp = lik(adapter, *(a[sl] for a in args), inner=i, **sub_est)  # (n, L) or (n, L, C)
            if i == 0:
                first[sl.start] = logp.detach()
            j = i % draws  # the mask draw this inner iteration scores
            old_i = old[j][sl].to(device) if old[j] is not None else first[sl.start]  # inner 0: ratio exactly 1
            ref_i = ref[j][sl].to(device) if ref else None
            loss, st = loss_fn(logp, old_i, ref_i, adv[sl], valid[sl], weights[sl], cfg.loss)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"loss is {loss.item()} at step {step} (inner {i}); stopping before the "
                                         "checkpoint is overwritten. Lower train.lr or check the rewards.")
            (loss * (sl.stop - sl.start) / len(rows)).backward()
            losses.append(loss.item())
            stats.update(st)
        allreduce_grads(adapter.model)
        gnorm = float(torch.nn.utils.clip_grad_norm_(adapter.model.parameters(), t.grad_clip))
        if not math.isfinite(gnorm):
            raise FloatingPointError(f"gradient norm is {gnorm} at step {step}; stopping with the last checkpoint intact")
        opt.step()
    timer["update"] = time.perf_counter() - tick
    rewards = all_r.flatten()  # every process's rewards: the logged statistics are global
    finite = rewards[torch.isfinite(rewards)]
    groups = all_r
    zero_std = sum(1 for g in groups if torch.isfinite(g).sum() > 1 and g[torch.isfinite(g)].std() == 0) / len(groups)
    tokens = int(valid.sum())
    n_parts = max(1, len(micro) * t.mu)
    exact = [r.status == "correct" for r in scored["rewards"] if r.scored]
    metrics = {"reward_mean": finite.mean().item() if finite.numel() else math.nan,
               "exact_mean": sum(exact) / len(exact) if exact else math.nan,
               "reward_std": finite.std().item() if finite.numel() > 1 else 0.0,
               "zero_std_groups": zero_std, "infra_failures": int((~torch.isfinite(rewards)).sum()),
               "loss": sum(losses) / len(losses), **{k: v / n_parts for k, v in stats.items()},
               "grad_norm": gnorm, **weight_stats(weights, valid),
               "completion_length": valid.float().sum(1).mean().item(),
               **{f"seconds_{k}": round(v, 4) for k, v in timer.items()},
               "tokens_per_s": tokens / max(1e-9, sum(timer.values())),
               **{f"passes_{k}": v for k, v in (counter.counts - passes_before).items()}}
    metrics.update(collapse_stats(batch, G, cfg.rollout.threshold))  # guard columns, from the record
    return {**metrics, **{trl: metrics[ours] for trl, ours in TRL_METRICS.items()}}


# TRL's GRPOTrainer names for the same numbers, logged beside ours (README: "Names people know")
TRL_METRICS = {"reward": "reward_mean", "frac_reward_zero_std": "zero_std_groups",
               "completions/mean_length": "completion_length", "clip_ratio/region_mean": "clip_frac"}


def same_masks(cfg: RLConfig) -> bool:
    """Whether every inner iteration scores the same canvases: no prompt masking, and strata that
    do not depend on the iteration (K = 1, or a deterministic partition: strided, commit_order,
    causal), and a base whose own likelihood draws no fresh masks per iteration (rl/bases/). Then one
    reference pass serves all mu iterations and inner 0's own pass is every iteration's old policy:
    the same numbers as separate passes, fewer forward passes."""
    return not fresh_masks(cfg) and cfg.sml.p_mask_prompt <= 0 and (cfg.sml.k == 1 or cfg.sml.partition != "random")


def _split(n: int, parts: int) -> list[slice]:
    parts = max(1, min(parts, n))
    edges = [round(i * n / parts) for i in range(parts + 1)]
    return [slice(a, b) for a, b in zip(edges, edges[1:])]
