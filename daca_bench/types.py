"""Central data types of daca-bench (frozen dataclasses; plug points as Protocols).

`Sample` and `Task` describe a verifiable task, `Reward` is what a verifier returns (status
separates a wrong answer from an answer that could not be scored), `Trajectory` is the
sampler's by-product (daca_bench/rl/sampler.py; docs/method.md, section 3).
What a task is: docs/tasks.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

# Reward statuses. Only INFRA_ERROR carries value NaN (left out of group statistics).
CORRECT = "correct"
WRONG = "wrong"
NO_ANSWER = "no_answer"
TIMEOUT = "timeout"
BAD_INPUT = "bad_input"
INFRA_ERROR = "infra_error"
STATUSES = (CORRECT, WRONG, NO_ANSWER, TIMEOUT, BAD_INPUT, INFRA_ERROR)


@dataclass(frozen=True)
class Sample:
    id: str
    prompt: str
    target: str  # a gold completion (what SFT trains on); may be "" when none is known
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reward:
    value: float  # in [0, 1] for exact scoring; NaN for an infrastructure failure
    status: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown reward status {self.status!r}; expected one of {STATUSES}")
        if self.status == INFRA_ERROR and not math.isnan(self.value):
            raise ValueError("an infrastructure failure must carry value NaN, never a score")

    @property
    def scored(self) -> bool:
        """False when the reward could not be judged (infrastructure failure, malformed sample):
        such rewards stay out of accuracies and group statistics."""
        return self.status not in (INFRA_ERROR, BAD_INPUT)

    def as_json_value(self) -> float | None:
        return None if math.isnan(self.value) else float(self.value)


Verifier = Callable[[Sample, str], Reward]


@dataclass(frozen=True)
class Task:
    name: str
    family: str  # math | code | constraint | json
    version: int
    samples: Sequence[Sample]
    verify: Verifier
    split: str = "test"

    def to_hf_dataset(self, n: int | None = None):
        """A `datasets.Dataset` for TRL and other trainers: `prompt`, `id` and the scoring fields
        (each sample's metadata; a dict such as a JSON `schema` is written as its JSON text), which
        is all `daca_bench.rewards.verify.reward_function(task.name)` needs to score a completion."""
        import json

        import datasets

        samples = self.samples if n is None else self.samples[:n]
        rows = [{"prompt": s.prompt, "id": s.id,
                 **{k: json.dumps(v) if isinstance(v, dict) else v for k, v in s.metadata.items()}}
                for s in samples]
        return datasets.Dataset.from_list(rows)


class TaskBuilder(Protocol):
    def __call__(self, split: str = "test", n: int | None = None, seed: int = 0, **kw) -> Task: ...
