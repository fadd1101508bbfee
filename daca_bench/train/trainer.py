"""The DACA-GRPO trainer: one step for GRPO, GSPO, REINFORCE++ and the field's bases (rl/bases/), with DPS and SML.

    daca-bench train --config configs/tiny.yaml train.init=runs/sft-tiny/final dps.enabled=true sml.k=4

Each step reads top to bottom: sample G completions per prompt with the trajectory record -> verify ->
advantages -> DPS weights -> log-probs under the old policy (and the reference when beta > 0) -> mu inner
updates -> log -> periodic greedy evaluation; the run around it is the shared loop (train/loop.py).
Under `torchrun --nproc_per_node N` every process takes B/N of the prompts on PyTorch's FSDP2
(engine/parallel.py: `train.parallel`), with token counts, metrics and evaluation over all processes,
so one process, N processes and `train.grad_accum=N` give the same update (docs/trainer.md).
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections import Counter
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import torch

from ..canvas import check_rl
from ..config import ConfigError, RLConfig, pick, to_dict
from ..engine.memory import enable_gradient_checkpointing, out_of_memory, sml_chunk
from ..engine.parallel import Parallel, rank_and_world
from ..engine.policy import disable_dropout, load_policy, start_policy, start_reference
from ..engine.runtime import PRECISIONS, autocast, git_describe, precision_record, versions
from ..eval.evaluate import eval_task, evaluate, mean_reward_beside, score, write_eval_records
from ..eval.prompts import task_prompts
from ..jsonl import column_means
from ..loaders import data_files_given
from ..models import DTYPES, default_device, require_available
from ..registry import task_record
from ..rl.bases import check as check_base
from ..rl.bases import estimator_for, fresh_masks, ratio_free
from ..rl.credit import dps_weights, weight_stats
from ..rl.ledger import PHASES, Ledger, run_ledger
from ..rl.likelihood import sml_logprobs
from ..rl.losses import ADVANTAGES, AGGREGATIONS, LOSSES
from ..rl.lossparts import row_norms, step_norms
from ..rl.sampler import sample
from ..rl.strata import CAUSAL, STRATA, fewest_steps, keyed_generator
from ..runfolder import RESUMABLE_RL
from .guards import Guard, collapse_stats, gathered
from .loop import Loop
from .reporters import reporter_names

PassCounter = Ledger  # the earlier name (benchmarks/); the ledger books canvases, tokens and FLOPs per phase


def _seed(*key) -> int:
    return int(keyed_generator(*key).initial_seed() % (2**62))


def validate(cfg: RLConfig) -> None:
    check_rl(cfg)  # every canvas, before the first step
    pick(LOSSES, cfg.loss.base, "loss.base")
    check_base(cfg)
    pick(AGGREGATIONS, cfg.loss.loss_type, "loss.loss_type")
    pick(STRATA, cfg.sml.partition, "sml.partition")
    from ..rl.credit import NORMS, SCORES

    pick(SCORES, cfg.dps.score, "dps.score")
    pick(NORMS, cfg.dps.norm, "dps.norm")
    reporter_names(cfg.train.report_to)
    pick(REWARDS, cfg.train.reward, "train.reward")
    pick(PRECISIONS, cfg.train.precision, "train.precision")
    _, world = rank_and_world()
    if cfg.train.prompts_per_step % world:
        raise ConfigError(f"train.prompts_per_step={cfg.train.prompts_per_step} must divide across {world} processes")


def train(cfg: RLConfig, out_dir: str | Path, resume: bool = True, progress: bool = True) -> dict:
    """An RL run in `out_dir` on the shared run loop (train/loop.py): the policy (and its reference), the
    train and test tasks, the step (`train_step`), periodic and final greedy evaluation, the guards."""
    t = cfg.train
    par = Parallel.start(t.parallel, t.lora, t.offload, t.load_in_4bit)  # torchrun's world (one process: none)
    validate(cfg)
    require_available(cfg.model if not t.init else replace(cfg.model, name=t.init), t.require_gpu)
    loop = Loop.open(cfg, "train", out_dir, resume, RESUMABLE_RL, par, progress, sharded=True, frozen=not t.lora)
    rank, world, out = par.rank, par.world, loop.out
    device = default_device()

    def prepare(model) -> None:
        if t.gradient_checkpointing:
            enable_gradient_checkpointing(model)
        if t.disable_dropout:  # old, current and reference passes then agree: the first inner ratio is exactly 1
            disable_dropout(model)

    adapter = start_policy(cfg, loop.ckpt, par, device, prepare)  # under the engine, sharded from the start
    reference = None
    if cfg.loss.beta > 0:  # with LoRA the reference is the adapter-disabled base model
        reference = adapter if t.lora else start_reference(cfg, par, device)  # full fine-tuning: sharded too
    counter = Ledger(adapter.model)  # compute per phase: FLOPs (FlopCounterMode), canvases, tokens
    if reference is not None and reference is not adapter:
        counter.watch(reference.model)
    train_task = training_task(cfg)
    test_task = eval_task(cfg, adapter)  # one fixed set for every cell, built as reproduce builds the start's
    if t.chat_template or t.max_prompt_length:  # d1: one user message of the chat template (+ prefill);
        train_task = _chat_task(adapter, train_task, t.chat_template, t.max_prompt_length)  # train prompts cut
    samples = list(train_task.samples)
    trainable = [p for p in adapter.model.parameters() if p.requires_grad]
    run = loop.optimiser(adapter, trainable, len(samples), betas=(t.adam_beta1, t.adam_beta2))
    given = data_files_given()  # --data-file: the local files a hub task was read from
    loop.write_config(
        {
            **to_dict(cfg),
            "git": git_describe(),
            "versions": versions(),
            "world_size": world,
            "parallel_used": par.mode,
            **precision_record(device, t.precision),
            **({"data_files": given} if given else {}),
        }
    )
    guard = Guard(cfg.guard)  # collapse guards (train/guards.py)

    def step(idx: list[int]) -> dict:
        per_rank = t.prompts_per_step // world
        my = idx[rank * per_rank : (rank + 1) * per_rank]
        try:
            metrics = train_step(
                adapter, reference, cfg, [samples[i] for i in my], train_task, run.step, run.optimizer, counter, par
            )
        except torch.OutOfMemoryError as exc:
            raise out_of_memory(run.step, exc) from None
        metrics.update(loop.advance())
        if t.eval_every and run.step % t.eval_every == 0 and run.step < t.steps:
            before = counter.snapshot()
            with counter("eval"):  # its per-prompt records too: a budget's arm (eval-stepN.jsonl, issue 48)
                mid = evaluate(adapter, test_task, cfg.eval, n=t.n_eval, par=par)
            metrics.update(
                counter.booked(before, ("eval",), par),
                eval_prompts=t.n_eval,
                test_accuracy=mid["accuracy"],
                **mean_reward_beside(mid, "test_mean_reward"),
            )
            if rank == 0:
                write_eval_records(out / f"eval-step{run.step}.jsonl", mid)
        return metrics

    def halt(metrics: dict) -> dict | None:  # guard.action=stop: checkpoint and stop
        tripped = par.any(guard.tripped(metrics, metrics["step"]))
        return {"stopped": True, "step": run.step, "guard": guard.message} if tripped else None

    with loop.running(f"train {cfg.loss.base} {t.task}", t.report_to, to_dict(cfg)):
        stopped = loop.steps(
            t.prompts_per_step,
            step,
            halt=halt,
            postfix=lambda m: {"reward": f"{m['reward_mean']:.3f}", "loss": f"{m['loss']:.4f}"},
        )
        if stopped:
            return stopped
        before = counter.snapshot()
        with counter("eval"):
            result = evaluate(adapter, test_task, cfg.eval, n=t.n_eval, par=par)
        final_eval = counter.booked(before, ("eval",), par)
        if rank == 0:
            write_eval_records(out / "eval.jsonl", result)
        summary = {
            "task": t.task,
            "base": cfg.loss.base,
            "dps": cfg.dps.enabled,
            "dps_score": cfg.dps.score,
            "sml_k": cfg.sml.k,
            "sml_partition": cfg.sml.partition,
            "steps": run.step,
            "test_accuracy": result["accuracy"],
            "n_eval": result["n"],
            **({"test_accuracy_d1": result["accuracy_d1"]} if "accuracy_d1" in result else {}),
            **mean_reward_beside(result, "test_mean_reward"),
            **mean_reward_beside(result, "test_mean_reward"),
            "eval_split": t.eval_split,
            **(regime_means(out / "metrics.jsonl") if rank == 0 else {}),
            "statuses": result["statuses"],
            "task_record": task_record(t.task, test_task.samples[: result["n"]]),
            **({"ledger": run_ledger(out / "metrics.jsonl", final_eval, result["n"])} if rank == 0 else {}),
        }
        with par.rollout(adapter.model):  # collective-free: rank 0 alone samples the examples
            if rank == 0:
                write_dps_examples(adapter, cfg, samples[:4], train_task, out / "dps_examples.json")
        return loop.finish(
            summary,
            fresh=lambda: load_policy(cfg, None),
            export=lambda model, live: final_model(model, cfg, live),
            stream=None if t.lora else DTYPES.get(cfg.model.dtype),  # full fine-tuning: streamed under the engine
        )


def final_model(model, cfg: RLConfig, live: bool):
    """final/'s model: LoRA merged into the base (a copy of the run's own model, `live`), else the fp32
    master weights back in model.dtype."""
    if cfg.train.lora:
        return (copy.deepcopy(model) if live else model).merge_and_unload()
    dtype = DTYPES.get(cfg.model.dtype)
    if live and dtype is not None and next(model.parameters()).dtype != dtype:
        return model.to(dtype)
    return model


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
        rows.append(
            {
                "prompt": s.prompt,
                "completion": batch.texts[i],
                "reward": task.verify(s, batch.texts[i]).as_json_value(),
                "tokens": [adapter.decode_token(t) for t in ids],
                "weights": w[i, :n].tolist(),
                "commit_step": batch.trajectory.commit_step[i, :n].tolist(),
                "score": dps.score,
            }
        )
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
        return get_task(t.task, split="train", n=t.n_train, seed=t.seed, protocol=t.protocol, **kw)
    except (TypeError, ValueError) as exc:
        if not shaping:
            raise
        raise ConfigError(
            f"train.reward={t.reward}: task {t.task!r} has no such reward ({exc}); use train.reward=exact"
        ) from None


def _chat_task(adapter, task, chat: bool = True, max_tokens: int = 0):
    wrapped = task_prompts(adapter, task.samples, chat, max_tokens)
    return replace(task, samples=[replace(s, prompt=p) for s, p in zip(task.samples, wrapped)])


def train_step(
    adapter, reference, cfg: RLConfig, prompts, task, step: int, opt, counter, par: Parallel | None = None
) -> dict:
    """One rollout batch and its mu inner updates; returns the step's metrics, over every process's rows."""
    par = par or Parallel("none")
    t, G = cfg.train, cfg.train.num_generations
    timer, before = {}, counter.snapshot()
    tick = time.perf_counter()
    # 1. rollouts with the trajectory record; one seed per sequence, keyed by the global prompt index, so batches
    # split across processes agree (collective-free: ranks may run different numbers of passes)
    rows = [s for s in prompts for _ in range(G)]
    first_prompt = par.rank * len(prompts)
    seq_ids = [(step, first_prompt + i // G, i % G) for i in range(len(rows))]
    adapter.model.eval()
    with counter("rollout"), autocast(adapter.device, t.precision), par.rollout(adapter.model):
        batch = sample(
            adapter, [s.prompt for s in rows], cfg.rollout, seed=[_seed(t.seed, "rollout", *k) for k in seq_ids]
        )
    timer["rollout"] = time.perf_counter() - tick
    # 2. verify (an infrastructure failure is NaN and stays out of the group statistics)
    tick = time.perf_counter()
    scored = score(task, rows, batch.texts)
    rewards = torch.tensor([r.value if r.scored else math.nan for r in scored["rewards"]], dtype=torch.float32)
    timer["verify"] = time.perf_counter() - tick
    # 3. advantages over groups (all processes' rewards when the method normalises over the batch)
    all_r = par.gather(rewards).view(-1, G)
    adv = ADVANTAGES[cfg.loss.base](all_r, cfg.loss).view(par.world, -1)[par.rank]
    # 4. DPS weights from the record: constants, no forward pass
    tick = time.perf_counter()
    valid = batch.completion_mask
    weights = dps_weights(batch.trajectory, valid, cfg.dps, seq_ids=seq_ids, seed=t.seed, warn_disabled=False)
    timer["credit"] = time.perf_counter() - tick
    # 5. old and reference log-probs, one mask draw per inner iteration
    tick = time.perf_counter()
    chunk = par.agree_min(sml_chunk(adapter, cfg, batch.prompt_ids.shape[1] + batch.completion_ids.shape[1]))
    est = dict(
        k=cfg.sml.k,
        partition=cfg.sml.partition,
        seq_ids=seq_ids,
        seed=t.seed,
        p_mask_prompt=cfg.sml.p_mask_prompt,
        commit_step=batch.trajectory.commit_step,
        chunk=chunk,
        logit_chunk=cfg.sml.logit_chunk,
        valid=batch.completion_mask,
        par=par,
    )  # par: the same passes per rank
    lik = estimator_for(cfg) or sml_logprobs  # the base's own likelihood (rl/bases/), or SML
    if cfg.sml.partition in CAUSAL or cfg.loss.base == "map":  # causal K: clamped alike on every rank and micro-batch
        block = getattr(adapter, "block_size", 0) if lik is sml_logprobs else 0
        est["fewest"] = fewest_steps(batch.trajectory.commit_step, block, par)
    args = (batch.prompt_ids, batch.prompt_mask, batch.completion_ids)
    # the same precision and mode as the update, so that the first inner step has ratio exactly 1
    adapter.model.train()
    # the distinct mask draws: one per inner iteration, or one for all when every iteration sees the same canvases
    draws = 1 if same_masks(cfg) else t.mu
    with torch.no_grad(), counter("likelihood_old"), autocast(adapter.device, t.precision, grad=True):
        # draw 0 needs none: inner 0's own pass, detached, is its old policy (same weights, masks, mode and precision)
        # a ratio-free base (wd1, spg) never reads the old policy: no old passes
        old = (
            [None] * draws
            if ratio_free(cfg)
            else [None] + [lik(adapter, *args, inner=i, **est) for i in range(1, draws)]
        )
        with reference.model.disable_adapter() if reference is adapter else nullcontext():
            ref = [lik(reference, *args, inner=i, **est) for i in range(draws)] if reference is not None else None
    timer["likelihood_old"] = time.perf_counter() - tick
    # 6. mu inner updates; token means over the whole step's tokens (every rank, every micro-batch)
    tick = time.perf_counter()
    device = adapter.device
    adv, weights, valid = adv.to(device), weights.to(device), valid.to(device)
    all_valid = par.gather(valid)  # (B*G over every rank, L)
    n_all = all_valid.shape[0]
    norms = step_norms(all_valid, cfg.loss.norm_rows)
    exact_norms = par.world == 1 and t.grad_accum == 1 and cfg.loss.norm_rows == 0  # one token mean: as it always was
    loss_fn = LOSSES[cfg.loss.base]
    micro = _split(len(rows), t.grad_accum)
    sums, gnorm = Counter(), 0.0  # row-weighted sums of the loss and its statistics
    first: dict[int, torch.Tensor] = {}  # inner 0's own log-probs per micro-batch: draw 0's old policy
    for i in range(t.mu):
        opt.zero_grad(set_to_none=True)
        for m, sl in enumerate(micro):
            sub_est = {**est, "seq_ids": seq_ids[sl], "commit_step": est["commit_step"][sl], "valid": est["valid"][sl]}
            with counter("likelihood"), autocast(device, t.precision, grad=True):
                logp = lik(adapter, *(a[sl] for a in args), inner=i, **sub_est)  # (n, L) or (n, L, C)
            if i == 0:
                first[sl.start] = logp.detach()
            j = i % draws  # the mask draw this inner iteration scores
            old_i = old[j][sl].to(device) if old[j] is not None else first[sl.start]  # inner 0: ratio exactly 1
            ref_i = ref[j][sl].to(device) if ref else None
            rows_at = slice(par.rank * len(rows) + sl.start, par.rank * len(rows) + sl.stop)
            scale = (sl.stop - sl.start) / n_all
            with nullcontext() if exact_norms else row_norms(*(x[rows_at] * scale for x in norms)):
                loss, st = loss_fn(logp, old_i, ref_i, adv[sl], valid[sl], weights[sl], cfg.loss)
            if par.any(not torch.isfinite(loss)):  # every rank stops, not only the one that saw it
                raise FloatingPointError(
                    f"loss is {loss.item()} at step {step} (inner {i}); stopping before the "
                    "checkpoint is overwritten. Lower train.lr or check the rewards."
                )
            with par.micro(adapter.model, last=m == len(micro) - 1), counter("likelihood"), counter.backward():
                (loss * (sl.stop - sl.start) / len(rows)).backward()
            sums.update({k: v * (sl.stop - sl.start) for k, v in {"loss": loss.item(), **st}.items()})
        gnorm = float(_full(torch.nn.utils.clip_grad_norm_(adapter.model.parameters(), t.grad_clip)))
        if not math.isfinite(gnorm):
            raise FloatingPointError(
                f"gradient norm is {gnorm} at step {step}; stopping with the last checkpoint intact"
            )
        opt.step()
    timer["update"] = time.perf_counter() - tick
    return {
        **step_metrics(par, all_r, scored, sums, n_all * t.mu, gnorm, weights, valid, batch, cfg, timer),
        **counter.booked(before, PHASES, par),
        "prompts": len(prompts) * par.world,
        "completions": n_all,
        "reward_calls": n_all,
    }


def _full(x):
    """A DTensor (the gradient norm under FSDP2) as a plain tensor; anything else as it is."""
    return x.full_tensor() if hasattr(x, "full_tensor") else x


def step_metrics(
    par: Parallel, all_r, scored, sums: Counter, n_rows: int, gnorm: float, weights, valid, batch, cfg, timer
) -> dict:
    """The step's logged numbers over every process's rows (the same as one process running them all);
    seconds_* and tokens_per_s are this process's."""
    G = cfg.train.num_generations
    rewards = all_r.flatten()  # every process's rewards
    finite = rewards[torch.isfinite(rewards)]
    zero_std = sum(1 for g in all_r if torch.isfinite(g).sum() > 1 and g[torch.isfinite(g)].std() == 0) / len(all_r)
    exact = [r.status == "correct" for r in scored["rewards"] if r.scored]
    counts = par.all_sum(torch.tensor([float(sum(exact)), float(len(exact))]))
    keys = sorted(sums)
    means = dict(zip(keys, (par.all_sum(torch.tensor([sums[k] for k in keys], dtype=torch.float64)) / n_rows).tolist()))
    w_all, v_all = par.gather(weights), par.gather(valid)
    tokens = int(valid.sum())
    metrics = {
        "reward_mean": finite.mean().item() if finite.numel() else math.nan,
        "exact_mean": (counts[0] / counts[1]).item() if counts[1] else math.nan,
        "reward_std": finite.std().item() if finite.numel() > 1 else 0.0,
        "zero_std_groups": zero_std,
        "infra_failures": int((~torch.isfinite(rewards)).sum()),
        **means,
        "grad_norm": gnorm,
        **weight_stats(w_all, v_all),
        "completion_length": v_all.float().sum(1).mean().item(),
        **{f"seconds_{k}": round(v, 4) for k, v in timer.items()},
        "tokens_per_s": tokens / max(1e-9, sum(timer.values())),
    }
    metrics.update(collapse_stats(gathered(batch, par), G, cfg.rollout.threshold))  # guard columns, from the record
    return {**metrics, **{trl: metrics[ours] for trl, ours in TRL_METRICS.items()}}


# TRL's GRPOTrainer names for the same numbers, logged beside ours (README: "Names people know")
TRL_METRICS = {
    "reward": "reward_mean",
    "frac_reward_zero_std": "zero_std_groups",
    "completions/mean_length": "completion_length",
    "clip_ratio/region_mean": "clip_frac",
}


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
