"""The protocols' answer readings: each source's post-processing of a reply (LLaDA's and DARE's
OpenCompass configs), written in this project's words, before our own verifier scores what it read.

    READERS["last_number"]("... so 3 + 4 = 7.")   # -> "<answer>\n7\n</answer>"

`ours` reads nothing (the task's verifier sees the reply); each source and file:line is in docs/evaluation.md.
"""
from __future__ import annotations

import re


def _last_number(text: str) -> str:
    found = re.findall(r"-?\d+\.\d+|-?\d+", text.split("Question:")[0])
    return f"<answer>\n{found[-1]}\n</answer>" if found else ""


def _boxed_or_sentence(text: str) -> str:
    from ..rewards.answers import last_boxed

    found = last_boxed(text)
    if found is None:
        parts = text.split(".")
        found = next((p for p in parts if re.search("final answer|answer is", p.lower())), parts[0])
    return f"<answer>\n{found.strip()}\n</answer>"


def _first_fence(text: str) -> str:
    blocks = re.findall(r"```\w*\n(.*?)```", text, re.S)
    return "```python\n" + (blocks[0] if blocks else text).lstrip() + "\n```"


def _begin_done(text: str) -> str:
    """Our reading of OpenCompass's MBPP cascade: the code between the BEGIN / DONE markers (brackets and
    quotes optional), else a fenced block, else what follows BEGIN, else the whole text."""
    for pattern in (r"\[?BEGIN\]?\s*'?(.*?)'?\s*\[?DONE\]?", r"```(?:python)?\s*(.*?)\s*```", r"\[?BEGIN\]?\s*'?(.*)"):
        m = re.search(pattern, text, re.S)
        if m and m.group(1).strip():
            text = m.group(1)
            break
    return "```python\n" + text.replace("\r\n", "\n").strip() + "\n```"


READERS = {"ours": lambda t: t, "last_number": _last_number, "boxed_or_sentence": _boxed_or_sentence,
           "first_fence": _first_fence, "begin_done": _begin_done}
