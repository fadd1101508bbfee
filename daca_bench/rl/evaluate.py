"""Greedy evaluation of a model on a task's held-out split: accuracy and reward statuses.

    evaluate(adapter, get_task("arithmetic", split="test"), SamplerConfig())
"""
from __future__ import annotations

import math
from collections import Counter

from ..config import SamplerConfig
from ..models import ModelAdapter
from ..types import Task
from .sampler import sample


def score(task: Task, samples, completions: list[str], workers: int = 1) -> dict:
    """Rewards for completions (code tasks: one parallel sandbox batch); unscorable ones stay out of the mean."""
    from ..rewards.verify import verify_many

    rewards = verify_many(task.verify, list(samples), list(completions), workers=workers)
    scored = [r.value for r in rewards if r.scored]
    return {
        "accuracy": sum(scored) / len(scored) if scored else math.nan,
        "n": len(rewards),
        "infra_failures": len(rewards) - len(scored),
        "statuses": dict(Counter(r.status for r in rewards)),
        "rewards": rewards,
    }


def evaluate(adapter: ModelAdapter, task: Task, cfg: SamplerConfig, n: int | None = None, seed: int = 0) -> dict:
    """Greedy (temperature 0 unless cfg says otherwise) decoding of the first n samples."""
    samples = list(task.samples)[:n] if n else list(task.samples)
    was_training = adapter.model.training
    adapter.model.eval()
    batch = sample(adapter, [s.prompt for s in samples], cfg, seed=seed, record=False)
    adapter.model.train(was_training)
    out = score(task, samples, batch.texts)
    out["completions"] = batch.texts
    out["forward_passes"] = batch.forward_passes
    return out
