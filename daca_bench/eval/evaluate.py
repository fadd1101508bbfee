"""Greedy evaluation of a model on a task's held-out split: accuracy, reward statuses and the records.

    evaluate(adapter, get_task("arithmetic", split="test"), SamplerConfig())
    evaluate(adapter, eval_task(cfg, adapter), cfg.eval, n=cfg.train.n_eval)   # an RL config's test set

`eval_task` is the one builder of an RL config's evaluation set: the trainer scores its cells on
it and `reproduce` scores the RL start on it, so the two are paired on the same prompts.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

from ..adapter import ModelAdapter
from ..config import RLConfig, SamplerConfig
from ..rl.sampler import row_seed, sample
from ..types import Task, correct_share, mean_reward, record_correct
from .prompts import task_prompts


def score(task: Task, samples, completions: list[str], workers: int = 1) -> dict:
    """Rewards for completions (code tasks: one parallel sandbox batch); unscorable ones stay out of the mean."""
    from ..rewards.verify import verify_many

    return summarize(verify_many(task.verify, list(samples), list(completions), workers=workers))


def summarize(rewards: list) -> dict:
    """Accuracy (the share of scored rewards whose status is correct; d1's too, for d1-protocol tasks),
    the mean reward beside it, counts and statuses of a list of rewards."""
    from ..rewards.scoring import d1_accuracy

    scored = [r.value for r in rewards if r.scored]
    d1 = d1_accuracy(rewards)
    return {
        "accuracy": correct_share(rewards),  # the share of correct answers, never the mean reward
        "mean_reward": mean_reward(rewards),  # differs from accuracy only under partial credit or shaping
        **({"accuracy_d1": d1} if d1 is not None else {}),  # d1's own verdict, beside ours (d1-protocol tasks)
        "n": len(rewards),
        "infra_failures": len(rewards) - len(scored),
        "statuses": dict(Counter(r.status for r in rewards)),
        "rewards": rewards,
    }


def mean_reward_beside(result: dict, key: str = "mean_reward") -> dict:
    """{KEY: the mean reward} where it differs from the accuracy (partial credit or shaping on), else {}: a
    summary shows the mean reward under its own name, never in place of the share of correct answers."""
    m, acc = result.get("mean_reward", math.nan), result.get("accuracy", math.nan)
    return {} if m == acc or (math.isnan(m) and math.isnan(acc)) else {key: m}


def eval_task(cfg: RLConfig, adapter: ModelAdapter) -> Task:
    """The fixed evaluation set of an RL config: the first train.n_eval samples of its task's
    train.eval_split drawn with train.test_seed, skipping the prompts train.test_exclude lists
    (one set for every cell of a grid, whatever the seed: registry.draw_test), as the model sees them: with train.chat_template one user message of the tokenizer's
    chat template, and the sample's prefill, as d1 prompts (never cut: max_prompt_length is for
    training prompts)."""
    from ..registry import test_set

    t = cfg.train
    task = test_set(t)
    if not (t.chat_template or t.max_prompt_length):  # the trainer's prompts take the prefill in these two cases
        return task
    wrapped = task_prompts(adapter, task.samples, t.chat_template)
    return replace(task, samples=[replace(s, prompt=p) for s, p in zip(task.samples, wrapped)])


def evaluate(
    adapter: ModelAdapter,
    task: Task,
    cfg: SamplerConfig,
    n: int | None = None,
    seed: int = 0,
    par=None,
    rule=None,
    decode=None,
) -> dict:
    """Greedy (temperature 0 unless cfg says otherwise) decoding of the first n samples. Each sample draws
    its noise from its own generator, seeded by (`seed`, its id: sampler.row_seed, as lm-eval's requests), so
    a sampled row does not depend on the batch size, the rows beside it or the rank. With `par`
    (engine/parallel.py) of several processes, rank r decodes and scores samples r, r + W, ... inside
    par.rollout and every rank gets all rows back in the samples' order (the rows of one process).
    `rule`: the sampler's EOS rule (sampler.Suppress); `decode`: completion ids -> text (default: up to
    the first EOS). out["step_maps"]: per sample the 1-based step at which each canvas position was committed."""
    samples = list(task.samples)[:n] if n else list(task.samples)
    rank, world = (par.rank, par.world) if par is not None else (0, 1)
    mine = samples[rank::world]
    was_training = adapter.model.training
    adapter.model.eval()
    with par.rollout(adapter.model) if par is not None else nullcontext():
        seeds = [row_seed(seed, str(s.id)) for s in mine]
        batch = sample(adapter, [s.prompt for s in mine], cfg, seed=seeds, record=False, rule=rule) if mine else None
    adapter.model.train(was_training)
    texts = ([decode(row) for row in batch.completion_ids] if decode else batch.texts) if batch is not None else []
    steps = batch.commit_step.tolist() if batch is not None else []
    rewards = score(task, mine, texts)["rewards"] if mine else []
    passes = batch.forward_passes if batch is not None else 0
    if world > 1:  # rank r's rows are samples r::W; put them back in order
        parts = par.gather_objects((texts, rewards, passes, steps))
        texts, rewards, steps = [None] * len(samples), [None] * len(samples), [None] * len(samples)
        for r, (t, w, _, m) in enumerate(parts):
            texts[r::world], rewards[r::world], steps[r::world] = t, w, m
        passes = max(p for _, _, p, _ in parts)
    out = summarize(rewards)
    out["ids"] = [s.id for s in samples]
    out["completions"] = texts
    out["step_maps"] = steps
    out["forward_passes"] = passes  # the most any process ran
    return out


def write_eval_records(path: str | Path, result: dict) -> None:
    """One JSON line per test prompt (id, completion, reward, status, step_maps: the 1-based sampler step
    of each canvas token's commit), written atomically: what the table pairs by prompt. An unscorable
    reward is null, never 0."""
    path = Path(path)
    tmp = path.with_suffix(".jsonl.tmp")
    steps = result.get("step_maps") or [None] * len(result["ids"])
    with open(tmp, "w", encoding="utf-8") as f:
        for i, c, r, m in zip(result["ids"], result["completions"], result["rewards"], steps):
            d1 = {"d1": r.details["d1"]} if "d1" in r.details else {}
            maps = {"step_maps": m} if m is not None else {}
            f.write(
                json.dumps({"id": i, "completion": c, "reward": r.as_json_value(), "status": r.status, **d1, **maps})
                + "\n"
            )
    tmp.replace(path)


def read_eval_records(path: str | Path) -> dict[str, float | None]:
    """id -> 1.0 for a correct answer, 0.0 for any other scored one, None for an unscorable one, from an
    eval.jsonl: what a table pairs by prompt (types.record_correct: the status decides, never the reward)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                row = json.loads(line)
                out[row["id"]] = record_correct(row, f"{path}:{number}")
    return out
