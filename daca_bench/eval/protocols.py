"""The evaluation protocols' table (`daca-bench eval --protocol`): a Row per protocol and task, `canvas`, the EOS rules.

    d1     d1's eval/eval.py: length 128, block 32, steps = length / 2, each task posed as it declares d1 (gsm8k, math500:
           d1's system prompt, `<reasoning>` prefill and verdict; registry.register_protocol), else as itself
    llada  LLaDA's OpenCompass settings for LLaDA-8B-Instruct: block = length = steps, its EOS rules, prompts, readings
    dare   DARE's OpenCompass settings for LLaDA-8B-Instruct: LLaDA's prompts and readings, shorter math blocks, a
           prefix KV cache (which drops the EOS rules)
    justgrpo  JustGRPO's eval.py: block 32, steps = length (one token a step), the task's own prompt

`prompts` poses a task under a row, `readers` reads its answers; each element's source file:line is in
docs/evaluation.md. A task the table does not list runs under the generic row "*" (its own prompt and
verifier, the protocol's decoding). Try: `protocols.canvas("llada", "gsm8k", None, None, None)`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import ConfigError
from ..rl.sampler import Suppress


@dataclass(frozen=True)
class Row:
    """One protocol's settings for one task. block/steps None: equal to the length; "half": length / 2."""

    length: int
    block: int | None = None
    steps: int | str | None = None
    never: tuple[str, ...] = ()  # LLaDA's logits_eos_inf: token names ("eos", "eot") never chosen
    late: tuple[str, ...] = ()  # LLaDA's confidence_eos_eot_inf: committed last
    prompt: str = ""  # "" = the task's own prompt; else a template over the sample's fields
    shots: int = 0
    reply: str = ""  # the assistant turn's opening, written for the model (MBPP's [BEGIN])
    reader: str = "ours"  # how the answer is read before our verifier scores it (READERS)
    cache: str = "none"
    decode: str = "to_eos"  # to_eos: up to the first EOS; skip_special: every token but special ones
    pose: str = ""  # pose each task as it declares this protocol (registry.register_protocol), where it does


GSM8K = "Question: {question}\nLet us work it out step by step.\nAnswer:"
MATH = "{question}\nWork through it step by step, then write the final answer inside \\boxed{{}}."
HUMANEVAL = "Finish the following Python code:\n{prompt}"
MBPP = "You are a skilled Python programmer. Your task: {text} The code must pass these tests:\n\n {tests}  \n"
LLADA = {
    "gsm8k": Row(512, late=("eos", "eot"), prompt=GSM8K, shots=4, reader="last_number"),
    "math500": Row(512, late=("eos", "eot"), prompt=MATH, reader="boxed_or_sentence"),
    "humaneval": Row(512, never=("eos",), prompt=HUMANEVAL, reader="first_fence"),
    "mbpp": Row(256, late=("eos", "eot"), prompt=MBPP, shots=3, reply="[BEGIN]\n", reader="begin_done"),
}
PROTOCOLS = {
    "d1": {"*": Row(128, 32, "half", pose="d1")},  # d1 eval/eval.py:186-187, :195: length 128, block 32, steps L / 2
    "llada": {**{k: replace(v, decode="skip_special") for k, v in LLADA.items()}, "*": Row(512, decode="skip_special")},
    # DARE sets use_cache=True in every LLaDA example: its model class then calls the prefix-cache generator,
    # which takes no EOS flags, so the flags its humaneval / mbpp examples set have no effect
    "dare": {
        "gsm8k": replace(LLADA["gsm8k"], length=256, block=8, late=(), cache="prefix", decode="skip_special"),
        "math500": replace(LLADA["math500"], block=64, late=(), cache="prefix", decode="skip_special"),
        "humaneval": replace(LLADA["humaneval"], never=(), cache="prefix", decode="skip_special"),
        "mbpp": replace(LLADA["mbpp"], late=(), cache="prefix", decode="skip_special"),
        "*": Row(512, cache="prefix", decode="skip_special"),
    },
    # JustGRPO eval.py:236-238: length 256, block 32, steps = length (one token a step); greedy, the task
    # as one user turn of the chat template, decoded without special tokens (:69, :80)
    "justgrpo": {"*": Row(256, 32, decode="skip_special")},
}
ALLOWS = {
    "d1": {"cache", "threshold"},
    "llada": set(),
    "dare": {"cache", "threshold"},
    "justgrpo": set(),
}  # what each source exposes
SHOT_IDS = {"mbpp": ("prompt", ("2", "3", "4"))}  # OpenCompass's three MBPP exemplars: the prompt split's tasks 2-4


def parse(text: str) -> list[str]:
    """`d1,llada` -> ["d1", "llada"]; an unknown name is one ConfigError line."""
    names = [p.strip() for p in str(text).split(",") if p.strip()]
    bad = [n for n in names if n not in PROTOCOLS]
    if bad or not names:
        raise ConfigError(
            f"--protocol {text}: unknown protocol {', '.join(bad) or '(none)'}; "
            f"choose from {', '.join(PROTOCOLS)} (several: --protocol d1,llada)"
        )
    return list(dict.fromkeys(names))


def row(name: str, task: str) -> Row:
    """Protocol NAME's row for TASK (its own, else the protocol's generic row "*")."""
    table = PROTOCOLS[name]
    return table.get(task) or table["*"]


def canvas(name: str, task: str, length: int | None, block: int | None, steps: int | None) -> tuple[int, int, int]:
    """(length, block, steps) of a protocol on a task, each overridable (--gen-length, --block-length, --steps)."""
    r = row(name, task)
    L = length or r.length
    b = min(block or r.block or L, L)
    default = max(L // 2, L // b) if r.steps == "half" else (r.steps or L)
    return L, b, steps or default


def check_options(name: str, cache: str, threshold: float | None) -> None:
    """Refuse, in one line, a speed-up the protocol's source does not have (its numbers would not be its)."""
    asked = {"cache"} if cache != "none" else set()
    asked |= {"threshold"} if threshold is not None else set()
    refused = asked - ALLOWS[name]
    if refused:
        raise ConfigError(
            f"--protocol {name}: its source decodes without "
            f"{' or '.join('a KV cache' if r == 'cache' else 'threshold decoding' for r in sorted(refused))}; "
            f"drop {' '.join('--' + r for r in sorted(refused))}, or use --protocol d1 or dare"
        )


def suppress(name: str, task: str, adapter, cache: str) -> Suppress | None:
    """The EOS rule as token ids: "eos" the model's EOS, "eot" the tokenizer's <|eot_id|> where it has
    one. Only the uncached path of the sources applies the rules (LLaDA's generate.py; DARE's cache drops them)."""
    r = row(name, task)
    if cache != "none" or not (r.never or r.late):
        return None
    ids = {"eos": [adapter.eos_token_id], "eot": _token_id(adapter.tokenizer, "<|eot_id|>")}
    pick = lambda names: tuple(sorted({i for n in names for i in ids[n]}))  # noqa: E731
    return Suppress(pick(r.never), pick(r.late))


def _token_id(tokenizer, token: str) -> list[int]:
    i = tokenizer.convert_tokens_to_ids(token)
    return [] if i is None or i == getattr(tokenizer, "unk_token_id", None) else [int(i)]
