"""Stock verifiers for a task of one's own: each reads the answer from a completion the way every
task does (the last `<answer>...</answer>`, else the family's rule) and returns a Reward whose
status follows tasks/README.md (the empty completion is always `no_answer`).

    from daca_bench.rewards.stock import exact, numeric, pattern, json_schema
    exact("0123", completion)              # normalised exact match (case, surrounding and repeated spaces)
    numeric("72", completion)              # the same number or expression (mathcheck: 72 = 72.0 = $72, 1/2 = 0.5)
    pattern(r"[a-z]+@[a-z]+\\.org", completion)  # the whole answer matches a regular expression
    json_schema({"type": "object"}, completion)  # a JSON value that validates under a schema (jsoncheck)

`daca-bench new-task` writes a task file that uses `exact` and names the others.
"""

from __future__ import annotations

import re

from ..types import Reward
from .answers import tagged
from .jsoncheck import score_json
from .mathcheck import score_math
from .scoring import correct_if, no_answer

__all__ = ["answer_text", "normalise", "exact", "numeric", "pattern", "json_schema"]


def answer_text(completion: str) -> str:
    """The answer a completion gives: the content of its last `<answer>` pair, else the whole text; stripped."""
    found = tagged(completion)
    return (completion if found is None else found).strip()


def normalise(text: str, case: bool = False) -> str:
    """TEXT with runs of whitespace made one space, stripped, and (unless CASE) lower-cased."""
    text = " ".join(text.split())
    return text if case else text.lower()


def exact(gold: str, completion: str, case: bool = False) -> Reward:
    """1 iff the answer equals GOLD once both are normalised (`normalise`; CASE: case matters)."""
    answer = answer_text(completion)
    if not answer:
        return no_answer()
    return correct_if(normalise(answer, case) == normalise(gold, case), answer=answer[:200])


def pattern(regex: str, completion: str, flags: int = 0) -> Reward:
    """1 iff the whole answer matches REGEX (re.fullmatch)."""
    answer = answer_text(completion)
    if not answer:
        return no_answer()
    return correct_if(re.fullmatch(regex, answer, flags) is not None, answer=answer[:200])


def numeric(gold: str, completion: str, timeout: float = 5.0) -> Reward:
    """1 iff the completion's math answer is GOLD's value (the math family's reading and equivalence)."""
    return score_math(gold, completion, timeout)


def json_schema(schema, completion: str) -> Reward:
    """1 iff the completion's JSON value validates under SCHEMA (an object or its JSON text)."""
    return score_json(schema, completion)
