"""Math word problems and competition math: `gsm8k` (openai/gsm8k) and `math500`
(HuggingFaceH4/MATH-500; its train split is the MATH train set d1 trained on, ankner/math-500),
scored by answer equivalence (daca_bench.rewards.mathcheck), never by string match.

Both declare d1's protocol (docs/paper-presets.md; `get_task("gsm8k", protocol="d1")`, RL's
`train.protocol: d1`, `eval --protocol d1`): the same data in d1's prompt layout (a system prompt
before the question; at test time a `\\boxed{}` request and the `<reasoning>` prefill after the
chat template), d1's training rewards under shaping="d1", and d1's evaluation verdict beside ours
in each reward's details["d1"] (`acc_d1` in the eval output). They were the tasks `gsm8k_d1` and
`math500_d1`.

Fields: `question` or `problem`, and `answer` (GSM8K's `... #### 72` solutions are accepted as
gold; so is a `\\boxed{}` answer). Load from the hub (online or cached) or a local file:
    daca-bench verify gsm8k --input completions.jsonl --output scored.jsonl
    get_task("gsm8k", split="test", path="gsm8k_test.jsonl")
"""

from __future__ import annotations

import re

from daca_bench.loaders import load_rows, select
from daca_bench.registry import protocol_wording, register_protocol, register_task
from daca_bench.rewards.answers import (
    d1_boxed,
    d1_first_tag,
    d1_gsm8k_answer,
    d1_gsm8k_gold,
    d1_plain,
    gold_math_answer,
    last_boxed,
)
from daca_bench.rewards.mathcheck import d1_equivalent, score_math
from daca_bench.rewards.scoring import (
    d1_gsm8k_terms,
    d1_math,
    d1_math500,
    d1_math_format,
    d1_metric,
    field,
    with_shaping,
)
from daca_bench.types import Reward, Sample, Task

VERSION = 1
PROMPT = (
    "Solve the problem. Reason step by step inside <reasoning></reasoning>, then give the "
    "final answer inside <answer></answer>.\n\nProblem: {question}\n"
)


def _reasoning(name: str, row: dict) -> str:
    if name == "gsm8k":
        text = str(row["answer"]).split("####")[0]
        return re.sub(r"<<[^<>]*>>", "", text).strip()  # GSM8K's calculator annotations
    return str(row.get("solution") or "").strip()


def from_record(name: str, row: dict, index: int, split: str, worked: bool = True) -> Sample:
    """A sample from a dataset record; KeyError/ValueError when the record is unusable. `worked`: the
    target opens with the worked solution where the record has one (d1's GSM8K target is the answer alone)."""
    question = str(field(row, "question", "problem"))
    answer = field(row, "answer", required=False)
    if answer is None:  # MATH train rows may hold only a worked solution: its boxed answer is the gold
        answer = last_boxed(str(field(row, "answer", "solution")))
        if answer is None:
            raise ValueError("the solution has no \\boxed{} answer")
    gold = gold_math_answer(answer)
    if not question.strip() or not gold:
        raise ValueError("empty question or answer")
    reasoning = _reasoning(name, row) if worked else ""
    target = (f"<reasoning>\n{reasoning}\n</reasoning>\n" if reasoning else "") + f"<answer>\n{gold}\n</answer>"
    ident = row.get("unique_id") or row.get("id") or f"{split}/{index}"
    return Sample(
        id=f"{name}/{ident}",
        prompt=PROMPT.format(question=question),
        target=target,
        metadata={"answer": gold, **{k: row[k] for k in ("level", "subject") if k in row}},
    )


def _build(name, hub_id, config, split, n, records, path, data_files, shaping, timeout, d1=d1_math) -> Task:
    def verify(sample: Sample, completion: str):
        return score_math(sample.metadata["answer"], completion, timeout)

    reward = with_shaping(verify, shaping, d1=d1)  # an unknown shaping fails before any data loads
    rows = (
        records
        if records is not None
        else load_rows(hub_id, config=config, split=split, path=path, data_files=data_files)
    )
    samples = [from_record(name, row, i, split) for i, row in enumerate(select(list(rows), n))]
    return Task(name, "math", VERSION, samples, reward, split)


@register_task(
    "gsm8k",
    family="math",
    version=VERSION,
    splits=("train", "test"),
    description="GSM8K grade-school word problems (openai/gsm8k), answer equivalence",
)
def gsm8k(
    split: str = "test",
    n: int | None = None,
    seed: int = 0,
    *,
    records=None,
    path=None,
    data_files=None,
    shaping: str | None = None,
    timeout: float = 5.0,
) -> Task:
    return _build("gsm8k", "openai/gsm8k", "main", split, n, records, path, data_files, shaping, timeout)


MATH_HUB = {"test": "HuggingFaceH4/MATH-500", "train": "ankner/math-500"}  # train: the MATH train set (d1's)


@register_task(
    "math500",
    family="math",
    version=VERSION,
    splits=("train", "test"),
    description="MATH-500 competition problems (HuggingFaceH4/MATH-500), math-verify equivalence",
)
def math500(
    split: str = "test",
    n: int | None = None,
    seed: int = 0,
    *,
    records=None,
    path=None,
    data_files=None,
    shaping: str | None = None,
    timeout: float = 5.0,
) -> Task:
    return _build(
        "math500", MATH_HUB[split], None, split, n, records, path, data_files, shaping, timeout, d1=d1_math500
    )


# ---- d1's protocol (dllm-reasoning/d1): prompts, training rewards, evaluation verdict --------
# The system prompts give d1's layout and instructions in this project's words (d1's text is not
# copied; $DACA_BENCH_D1_PROMPTS swaps in a user's copy of it, daca_bench.registry.protocol_wording).
D1_LAYOUT = "\nAnswer in exactly this layout:\n<reasoning>\n...\n</reasoning>\n<answer>\n...\n</answer>\n"
D1_EXPERT = (
    "You are an expert in mathematics. Solve the question below step by step and put the final answer inside \\boxed{}."
)
D1_TEST_SYSTEM = (
    D1_EXPERT + "\nAnswer in exactly this layout:\n<reasoning>\nyour step-by-step reasoning\n"
    "</reasoning>\n<answer>\n\\boxed{...}\n</answer>"
)
D1_PREFILL = "<reasoning>"  # d1 starts every evaluation answer with it, after the chat template


def d1_prompt(name: str, split: str, question: str) -> str:
    """The user message of a math task under d1's protocol: system prompt, blank line, question."""
    if split == "test":
        return protocol_wording("d1", name, split, D1_TEST_SYSTEM) + "\n\n" + question
    system = protocol_wording("d1", name, split, D1_LAYOUT)
    return system + "\n\n" + (question if name == "gsm8k" else D1_EXPERT + " \n\n" + question)


def d1_gsm8k_reward(sample: Sample, completion: str, reward: Reward) -> Reward:
    """d1's GSM8K training reward (five terms, at most 4.0); the status stays our verdict."""
    if not reward.scored:
        return reward
    terms = d1_gsm8k_terms(sample.metadata["answer"], completion)
    return Reward(sum(terms.values()), reward.status, {**reward.details, **terms, "shaping": "d1"})


def d1_math_reward(sample: Sample, completion: str, reward: Reward) -> Reward:
    """d1's MATH training reward: 2.0 x d1's match of the last boxed answers + d1_math_format."""
    if not reward.scored:
        return reward
    text = d1_plain(completion)
    answer = d1_boxed(text)
    ok = d1_equivalent(text if answer is None else answer, sample.metadata["d1_gold"])
    fmt = d1_math_format(text)
    return Reward(
        2.0 * ok + fmt, reward.status, {**reward.details, "correct_d1": 2.0 * ok, "format": fmt, "shaping": "d1"}
    )


def d1_gsm8k_verdict(sample: Sample, completion: str) -> bool:
    """d1's GSM8K evaluation verdict: its number reading equals the gold number."""
    value, gold = d1_gsm8k_answer(completion), d1_gsm8k_gold(sample.metadata["answer"])
    return value is not None and gold is not None and value == gold


def d1_math_verdict(sample: Sample, completion: str) -> bool:
    """d1's MATH evaluation verdict: the last box (else the first <answer> pair) matches after normalising."""
    answer = d1_boxed(completion) or d1_first_tag(completion)
    return d1_equivalent(answer, sample.metadata["answer"])


D1_MATH = {
    "gsm8k": ("openai/gsm8k", "main", d1_gsm8k_verdict, d1_gsm8k_reward),
    "math500": (None, None, d1_math_verdict, d1_math_reward),
}


def _build_d1(name, split, n, records, path, data_files, shaping, timeout) -> Task:
    hub_id, config, verdict, train_reward = D1_MATH[name]

    def verify(sample: Sample, completion: str) -> Reward:
        reward = score_math(sample.metadata["answer"], completion, timeout)
        return d1_metric(reward, verdict(sample, completion)) if reward.scored else reward

    def d1_shaped(sample: Sample, completion: str) -> Reward:
        return train_reward(sample, completion, verify(sample, completion))

    if shaping not in (None, "d1"):
        raise ValueError(f"this task has no {shaping!r} shaping")
    rows = (
        records
        if records is not None
        else load_rows(hub_id or MATH_HUB[split], config=config, split=split, path=path, data_files=data_files)
    )
    samples = []
    for i, row in enumerate(select(list(rows), n)):
        base = from_record(name, row, i, split, worked=name != "gsm8k")
        question = str(field(row, "question", "problem"))
        meta = dict(base.metadata)
        if name == "math500":  # d1's training gold: the last box of the worked solution
            solution = str(row.get("solution") or base.metadata["answer"])
            meta["d1_gold"] = d1_boxed(solution) or solution
        if split == "test":
            meta["prefill"] = D1_PREFILL
        samples.append(Sample(base.id, d1_prompt(name, split, question), base.target, meta))
    return Task(name, "math", VERSION, samples, d1_shaped if shaping == "d1" else verify, split)


@register_protocol("gsm8k", "d1")
def gsm8k_d1(
    split: str = "test",
    n: int | None = None,
    seed: int = 0,
    *,
    records=None,
    path=None,
    data_files=None,
    shaping: str | None = None,
    timeout: float = 5.0,
) -> Task:
    """GSM8K under d1's protocol: d1's prompts, rewards, and d1's verdict beside ours."""
    return _build_d1("gsm8k", split, n, records, path, data_files, shaping, timeout)


@register_protocol("math500", "d1")
def math500_d1(
    split: str = "test",
    n: int | None = None,
    seed: int = 0,
    *,
    records=None,
    path=None,
    data_files=None,
    shaping: str | None = None,
    timeout: float = 5.0,
) -> Task:
    """MATH-500 under d1's protocol (MATH train set): d1's prompts, rewards, verdict beside ours."""
    return _build_d1("math500", split, n, records, path, data_files, shaping, timeout)
