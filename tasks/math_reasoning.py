"""Math word problems and competition math: `gsm8k` (openai/gsm8k) and `math500`
(HuggingFaceH4/MATH-500), scored by answer equivalence (daca_bench.rewards.mathcheck), never by
string match.

Fields: `question` or `problem`, and `answer` (GSM8K's `... #### 72` solutions are accepted as
gold; so is a `\\boxed{}` answer). Load from the hub (online or cached) or a local file:
    daca-bench verify gsm8k --input completions.jsonl --output scored.jsonl
    get_task("gsm8k", split="test", path="gsm8k_test.jsonl")
"""
from __future__ import annotations

import re

from daca_bench.loaders import load_rows, select
from daca_bench.registry import register_task
from daca_bench.rewards.answers import gold_math_answer
from daca_bench.rewards.mathcheck import score_math
from daca_bench.rewards.scoring import d1_math, field, with_shaping
from daca_bench.types import Sample, Task

VERSION = 1
PROMPT = ("Solve the problem. Reason step by step inside <reasoning></reasoning>, then give the "
          "final answer inside <answer></answer>.\n\nProblem: {question}\n")


def _reasoning(name: str, row: dict) -> str:
    if name == "gsm8k":
        text = str(row["answer"]).split("####")[0]
        return re.sub(r"<<[^<>]*>>", "", text).strip()  # GSM8K's calculator annotations
    return str(row.get("solution") or "").strip()


def from_record(name: str, row: dict, index: int, split: str) -> Sample:
    """A sample from a dataset record; KeyError/ValueError when the record is unusable."""
    question = str(field(row, "question", "problem"))
    answer = field(row, "answer")
    gold = gold_math_answer(answer)
    if not question.strip() or not gold:
        raise ValueError("empty question or answer")
    reasoning = _reasoning(name, row)
    target = (f"<reasoning>\n{reasoning}\n</reasoning>\n" if reasoning else "") + f"<answer>\n{gold}\n</answer>"
    ident = row.get("unique_id") or row.get("id") or f"{split}/{index}"
    return Sample(id=f"{name}/{ident}", prompt=PROMPT.format(question=question), target=target,
                  metadata={"answer": gold, **{k: row[k] for k in ("level", "subject") if k in row}})


def _build(name, hub_id, config, split, n, records, path, data_files, shaping, timeout) -> Task:
    def verify(sample: Sample, completion: str):
        return score_math(sample.metadata["answer"], completion, timeout)

    reward = with_shaping(verify, shaping, d1=d1_math)  # an unknown shaping fails before any data loads
    rows = records if records is not None else load_rows(hub_id, config=config, split=split,
                                                         path=path, data_files=data_files)
    samples = [from_record(name, row, i, split) for i, row in enumerate(select(list(rows), n))]
    return Task(name, "math", VERSION, samples, reward, split)


@register_task("gsm8k", family="math", version=VERSION, splits=("train", "test"),
               description="GSM8K grade-school word problems (openai/gsm8k), answer equivalence")
def gsm8k(split: str = "test", n: int | None = None, seed: int = 0, *, records=None, path=None,
          data_files=None, shaping: str | None = None, timeout: float = 5.0) -> Task:
    return _build("gsm8k", "openai/gsm8k", "main", split, n, records, path, data_files, shaping, timeout)


@register_task("math500", family="math", version=VERSION, splits=("test",),
               description="MATH-500 competition problems (HuggingFaceH4/MATH-500), math-verify equivalence")
def math500(split: str = "test", n: int | None = None, seed: int = 0, *, records=None, path=None,
            data_files=None, shaping: str | None = None, timeout: float = 5.0) -> Task:
    return _build("math500", "HuggingFaceH4/MATH-500", None, split, n, records, path, data_files, shaping, timeout)
