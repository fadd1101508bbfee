"""Scoring helpers shared by the task files: reward constructors, leak-free splits, lazy
generated sample lists, and the d1-compatible reward shaping (an explicit option, off by
default; see tasks/README.md).

    from daca_bench.rewards.scoring import hash_split, correct_if, no_answer
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from ..types import (
    BAD_INPUT,
    CORRECT,
    INFRA_ERROR,
    NO_ANSWER,
    TIMEOUT,
    WRONG,
    Reward,
    Sample,
)
from .answers import d1_plain, d1_xml_answer, tagged

SHAPINGS = (None, "d1", "dense")


def check_shaping(shaping: str | None) -> str | None:
    if shaping not in SHAPINGS:
        raise ValueError(f"unknown shaping {shaping!r}; choose one of {SHAPINGS}")
    return shaping


def correct_if(ok: bool, **details: Any) -> Reward:
    return Reward(1.0 if ok else 0.0, CORRECT if ok else WRONG, details)


def wrong(reason: str, **details: Any) -> Reward:
    return Reward(0.0, WRONG, {"reason": reason, **details})


def no_answer(**details: Any) -> Reward:
    return Reward(0.0, NO_ANSWER, details)


def timeout(**details: Any) -> Reward:
    return Reward(0.0, TIMEOUT, details)


def bad_input(error: str, **details: Any) -> Reward:
    """The sample itself cannot be scored (a malformed record): not the completion's fault."""
    return Reward(0.0, BAD_INPUT, {"error": error, **details})


def infra_error(error: str, **details: Any) -> Reward:
    """The scoring machinery failed: NaN, left out of every mean and group baseline."""
    return Reward(math.nan, INFRA_ERROR, {"error": error, **details})


HASH_SPLITS = ("train", "dev", "test")


def hash_split(key: str, test_share: int = 64, dev_share: int = 32) -> str:
    """'test' for about test_share/256 of all keys (25 % by default), 'dev' for the next
    dev_share/256 (12.5 %: for choosing settings without touching the test set), else 'train'.
    The key is what must not leak across splits (a solution grid, an instance, an expression)."""
    byte = hashlib.sha256(key.encode()).digest()[0]
    return "test" if byte < test_share else "dev" if byte < test_share + dev_share else "train"


def stable_seed(*parts: Any) -> int:
    """A seed derived from names and numbers, identical on every machine and Python run."""
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:8], "big")


class LazySamples(Sequence):
    """A sample list whose length is known at once and whose items are generated on first use
    (so `daca-bench tasks` can list sizes of generated tasks without generating them)."""

    def __init__(self, n: int, generate: Callable[[], list[Sample]]):
        self._n, self._generate, self._items = n, generate, None

    def _all(self) -> list[Sample]:
        if self._items is None:
            self._items = self._generate()
            if len(self._items) != self._n:
                raise RuntimeError(f"generator made {len(self._items)} samples, expected {self._n}")
        return self._items

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        return self._all()[i]

    def __iter__(self):
        return iter(self._all())


def field(row: dict, *names: str, required: bool = True, default: Any = None) -> Any:
    """The first of `names` present in the record; KeyError naming them all when required."""
    for name in names:
        if name in row and row[name] is not None:
            return row[name]
    if required:
        raise KeyError(f"record lacks field {' or '.join(repr(n) for n in names)}")
    return default


# ---- d1-compatible shaping (diffu-GRPO's reward terms, re-derived from their description) ----
def d1_format_terms(completion: str) -> dict[str, float]:
    """The format bonuses of d1's math rewards, with DOTALL so that multi-line answers count:
    strict (<reasoning>..</reasoning>\\n<answer>..</answer>, 0.5), soft (both tag pairs in
    order, 0.5), integer answer (0.5) and tag counting (0.125 per tag seen once, minus a
    penalty for text after </answer>)."""
    strict = (
        re.fullmatch(r"\s*<reasoning>\n.*?\n</reasoning>\n<answer>\n.*?\n</answer>\s*", completion, re.DOTALL)
        is not None
    )
    soft = re.search(r"<reasoning>.*?</reasoning>\s*<answer>.*?</answer>", completion, re.DOTALL) is not None
    answer = tagged(completion)
    integer = answer is not None and re.fullmatch(r"-?\d+", answer) is not None
    count = 0.0
    for tag in ("<reasoning>\n", "\n</reasoning>\n", "\n<answer>\n", "\n</answer>"):
        if completion.count(tag) == 1:
            count += 0.125
    tail = completion.split("\n</answer>")[-1] if "\n</answer>" in completion else ""
    count -= 0.001 * len(tail.strip())
    return {"strict_format": 0.5 * strict, "soft_format": 0.5 * soft, "int_answer": 0.5 * integer, "xml_count": count}


def d1_math(reward: Reward, completion: str) -> Reward:
    """d1's GSM8K/MATH reward: 2.0 x correctness + the format terms (max 4.0)."""
    if not reward.scored:
        return reward
    terms = d1_format_terms(completion)
    value = 2.0 * (reward.status == CORRECT) + sum(terms.values())
    return Reward(value, reward.status, {**reward.details, **terms, "shaping": "d1"})


def d1_math_format(completion: str) -> float:
    """d1's MATH format term as its code computes it: 0.5 x (1 for an `<answer>` tag + 0.5).
    d1 meant the second half to be 1 when the answer holds a `\\boxed`, 0.5 otherwise, but its
    test reads a backspace character (the string "\\boxed" without its backslash escaped), so
    the half is always 0.5: the term is 0.75 with an `<answer>` tag and 0.25 without."""
    return 0.5 * ((1.0 if "<answer>" in completion else 0.0) + 0.5)


def d1_math500(reward: Reward, completion: str) -> Reward:
    """d1's MATH reward on our verdict: 2.0 x correct + d1_math_format (at most 2.75)."""
    if not reward.scored:
        return reward
    fmt = d1_math_format(completion)
    return Reward(
        2.0 * (reward.status == CORRECT) + fmt, reward.status, {**reward.details, "format": fmt, "shaping": "d1"}
    )


def d1_countdown(reward: Reward, completion: str) -> Reward:
    """d1's countdown reward: 1.0 correct, 0.1 for any tagged answer, else 0."""
    if not reward.scored:
        return reward
    value = 1.0 if reward.status == CORRECT else (0.1 if tagged(completion) is not None else 0.0)
    return Reward(value, reward.status, {**reward.details, "shaping": "d1"})


def d1_sudoku(reward: Reward, completion: str) -> Reward:
    """d1's sudoku reward: the fraction of blank cells filled correctly."""
    if not reward.scored:
        return reward
    value = 1.0 if reward.status == CORRECT else float(reward.details.get("blank_fraction_correct", 0.0))
    return Reward(value, reward.status, {**reward.details, "shaping": "d1"})


def shaped(verify: Callable[[Sample, str], Reward], shape: Callable[[Reward, str], Reward] | None):
    """Wrap a verifier with a shaping function (or return it unchanged for shape=None)."""
    if shape is None:
        return verify

    def shaped_verify(sample: Sample, completion: str) -> Reward:
        return shape(verify(sample, completion), completion)

    shaped_verify.__name__ = f"{getattr(verify, '__name__', 'verify')}_shaped"
    return shaped_verify


# ---- dense training rewards: partial credit for RL, while the test metric stays exact match ----
PARTIAL_WEIGHT = 0.5  # a wrong answer earns at most half of a correct one


def dense_reward(reward: Reward, credit: float) -> Reward:
    """A wrong (or unanswered) answer's reward under the dense shaping: PARTIAL_WEIGHT x its
    partial credit, clipped to [0, 1]; the status is kept."""
    credit = min(1.0, max(0.0, float(credit)))
    return Reward(PARTIAL_WEIGHT * credit, reward.status, {**reward.details, "partial": credit, "shaping": "dense"})


def dense(verify: Callable[[Sample, str], Reward], partial: Callable[[Sample, str, Reward], float]):
    """Wrap a verifier so that a wrong (or unanswered) completion earns PARTIAL_WEIGHT x its
    partial credit in [0, 1] (the task's `partial` function); a correct one keeps 1.0, the status
    is unchanged (accuracy still counts exact matches) and an unscorable one stays unscored."""

    def dense_verify(sample: Sample, completion: str) -> Reward:
        reward = verify(sample, completion)
        if not reward.scored or reward.status == CORRECT:
            return reward
        return dense_reward(reward, partial(sample, completion, reward))

    dense_verify.__name__ = f"{getattr(verify, '__name__', 'verify')}_dense"
    return dense_verify


def with_shaping(
    verify: Callable[[Sample, str], Reward],
    shaping: str | None,
    partial: Callable[[Sample, str, Reward], float] | None = None,
    d1: Callable[[Reward, str], Reward] | None = None,
):
    """A task's verifier under `shaping` (None, "d1" or "dense"): unchanged, d1's shaping, or the
    dense partial credit. A shaping the task does not define is a ValueError, never a silent
    fall-back to the exact reward."""
    shaping = check_shaping(shaping)
    if shaping is None:
        return verify
    if shaping == "d1" and d1 is not None:
        return shaped(verify, d1)
    if shaping == "dense" and partial is not None:
        return dense(verify, partial)
    raise ValueError(f"this task has no {shaping!r} shaping")


def digit_credit(gold: str, answer: str | None) -> float:
    """Fraction of digit positions (aligned from the right, sign included) that agree."""
    if not answer:
        return 0.0
    width = max(len(gold), len(answer))
    g, a = gold.rjust(width), answer.rjust(width)
    return sum(x == y for x, y in zip(g, a)) / width


# ---- d1's own training rewards and evaluation metric (the d1-protocol tasks: gsm8k_d1, ...) ----
def d1_gsm8k_terms(gold: str, completion: str) -> dict[str, float]:
    """d1's five GSM8K reward terms, computed as its code does (single-line `.` in the format
    patterns, the answer read after the last `<answer>`, correctness an exact string match)."""
    text = d1_plain(completion)
    answer = d1_xml_answer(text)
    count = 0.0
    if text.count("<reasoning>\n") == 1:
        count += 0.125
    if text.count("\n</reasoning>\n") == 1:
        count += 0.125
    if text.count("\n<answer>\n") == 1:
        count += 0.125 - 0.001 * len(text.split("\n</answer>\n")[-1])
    if text.count("\n</answer>") == 1:
        count += 0.125 - 0.001 * (len(text.split("\n</answer>")[-1]) - 1)
    strict = re.match(r"^<reasoning>\n.*?\n</reasoning>\n<answer>\n.*?\n</answer>\n$", text) is not None
    soft = re.match(r"<reasoning>.*?</reasoning>\s*<answer>.*?</answer>", text) is not None
    return {
        "xml_count": count,
        "soft_format": 0.5 * soft,
        "strict_format": 0.5 * strict,
        "int_answer": 0.5 * answer.isdigit(),
        "correct_d1": 2.0 * (answer == str(gold)),
    }


def d1_metric(reward: Reward, correct: float, total: float = 1.0) -> Reward:
    """`reward` with d1's evaluation verdict beside ours: details["d1"] = [correct, total]
    (a sudoku puzzle counts its blank cells); acc_d1 = sum(correct) / sum(total) over a test set."""
    return Reward(reward.value, reward.status, {**reward.details, "d1": [float(correct), float(total)]})


def d1_accuracy(rewards) -> float | None:
    """d1's metric over scored rewards that carry it (None when none does): d1 pools the counts."""
    pairs = [r.details["d1"] for r in rewards if r.scored and "d1" in r.details]
    total = sum(t for _, t in pairs)
    return sum(c for c, _ in pairs) / total if total else None
