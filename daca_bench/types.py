"""Central data types of daca-bench (frozen dataclasses; plug points as Protocols).

`Sample` and `Task` describe a verifiable task, `Reward` is what a verifier returns (status
separates a wrong answer from an answer that could not be scored), `Trajectory` is the
sampler's by-product (daca_bench/rl/sampler.py; docs/method.md, section 3). `CheckedVerify` is a
registered task's verifier as every caller gets it: a value the task does not allow is a RewardError
of one line naming the task and the completion (registry.register_task wraps each builder's Task).
What a task is: docs/tasks.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# Reward statuses. Only INFRA_ERROR carries value NaN (left out of group statistics).
CORRECT = "correct"
WRONG = "wrong"
NO_ANSWER = "no_answer"
TIMEOUT = "timeout"
BAD_INPUT = "bad_input"
INFRA_ERROR = "infra_error"
STATUSES = (CORRECT, WRONG, NO_ANSWER, TIMEOUT, BAD_INPUT, INFRA_ERROR)
# An exact (unshaped) reward is 1 for correct and 0 for wrong, no_answer and timeout; a task that declares
# partial credit (register_task(partial_credit=True)) may score those in [0, 1]. A shaped reward (one whose
# details name its "shaping") lies in its shaping's declared range: d1's GSM8K reward is at most 4.0 and
# its format terms may go below 0; a task may declare its own (register_task(shaped_range=(lo, hi))).
REWARD_RANGE = (0.0, 1.0)
SHAPED_RANGES = {"dense": (0.0, 1.0), "d1": (-math.inf, 4.0)}


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
        if self.status != INFRA_ERROR and isinstance(self.value, float) and not math.isfinite(self.value):
            raise ValueError(
                f"a {self.status} reward's value is {self.value}; only an infrastructure failure "
                "carries NaN (rewards.scoring.infra_error)"
            )

    @property
    def scored(self) -> bool:
        """False when the reward could not be judged (infrastructure failure, malformed sample):
        such rewards stay out of accuracies and group statistics."""
        return self.status not in (INFRA_ERROR, BAD_INPUT)

    def as_json_value(self) -> float | None:
        return None if math.isnan(self.value) else float(self.value)


Verifier = Callable[[Sample, str], Reward]


def correct_share(rewards) -> float:
    """Accuracy: the share of the scored rewards whose status is correct (NaN when none is scored), never
    their mean value (a partial or shaped reward's mean is the `mean_reward` beside it)."""
    scored = [r for r in rewards if r.scored]
    return sum(r.status == CORRECT for r in scored) / len(scored) if scored else math.nan


def mean_reward(rewards) -> float:
    """The mean value of the scored rewards (NaN when none is scored): what training maximises."""
    scored = [r.value for r in rewards if r.scored]
    return sum(scored) / len(scored) if scored else math.nan


def record_correct(row: Mapping[str, Any], where: str = "a record") -> float | None:
    """A per-prompt record's correctness (an eval.jsonl row: `reward`, `status`): 1.0 correct, 0.0 scored
    but not correct, None unscorable (reward null). A record without a status counts its reward only where
    it is exactly 0 or 1 (as one whose status is none of STATUSES); any other is refused in one line (a mean
    reward cannot pass for an accuracy)."""
    if row.get("reward") is None or row.get("status") in (INFRA_ERROR, BAD_INPUT):
        return None
    if row.get("status") in STATUSES:
        return 1.0 if row["status"] == CORRECT else 0.0
    if row["reward"] in (0, 1):
        return float(row["reward"])
    from .errors import ConfigError

    raise ConfigError(
        f"{where}: reward {row['reward']!r} without a known status: whether the answer was correct is not "
        "recorded, so no accuracy can be read from it; rescore the completions with `daca-bench verify`"
    )


def reward_problem(reward: Reward, partial_credit: bool = False, shaped_range=None) -> str | None:
    """Why REWARD's value is not one its task allows (None: it is): see REWARD_RANGE above."""
    if not reward.scored:
        return None
    v, shaping = reward.value, reward.details.get("shaping")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        return f"value {v!r} is not a number"
    if shaping is not None:
        lo, hi = shaped_range or SHAPED_RANGES.get(shaping, REWARD_RANGE)
        return None if lo <= v <= hi else f"is outside [{lo:g}, {hi:g}], the range of its {shaping!r} shaping"
    if not REWARD_RANGE[0] <= v <= REWARD_RANGE[1]:
        return "is outside [0, 1]"
    if reward.status == CORRECT and v != 1:
        return "must be 1 for a correct answer"
    if reward.status in (WRONG, NO_ANSWER, TIMEOUT) and v != 0 and not partial_credit:
        return (
            f"must be 0 for {reward.status} (a task that gives partial credit declares it: "
            "register_task(..., partial_credit=True))"
        )
    return None


class CheckedVerify:
    """A task's verifier whose every reward is checked (`reward_problem`): a value the task does not allow
    raises a RewardError naming the task, the reward and the completion. `inner` is the unchecked one
    (the battery reports its values itself); `batch` is kept where the verifier has one (code tasks)."""

    def __init__(self, inner: Callable, task: str, partial_credit: bool = False, shaped_range=None):
        self.inner, self.task, self.partial_credit, self.shaped_range = inner, task, partial_credit, shaped_range
        self.__name__ = getattr(inner, "__name__", "verify")
        if hasattr(inner, "batch"):
            self.batch = self._batch

    def check(self, reward: Reward, completion: str) -> Reward:
        problem = (
            reward_problem(reward, self.partial_credit, self.shaped_range)
            if isinstance(reward, Reward)
            else f"is {type(reward).__name__}, not a Reward"
        )
        if problem:
            from .errors import RewardError

            shown = " ".join(str(completion).split())
            raise RewardError(
                f"task {self.task!r}: reward {getattr(reward, 'value', reward)!r} "
                f"(status {getattr(reward, 'status', '?')}) {problem}; completion "
                f"{shown[:60] + ('...' if len(shown) > 60 else '')!r}"
            )
        return reward

    def __call__(self, sample: Sample, completion: str) -> Reward:
        return self.check(self.inner(sample, completion), completion)

    def _batch(self, samples, completions, **kw) -> list[Reward]:
        return [self.check(r, c) for r, c in zip(self.inner.batch(samples, completions, **kw), completions)]


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
        rows = [
            {
                "prompt": s.prompt,
                "id": s.id,
                **{k: json.dumps(v) if isinstance(v, dict) else v for k, v in s.metadata.items()},
            }
            for s in samples
        ]
        return datasets.Dataset.from_list(rows)


class TaskBuilder(Protocol):
    def __call__(self, split: str = "test", n: int | None = None, seed: int = 0, **kw) -> Task: ...
