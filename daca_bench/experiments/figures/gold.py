"""Tasks with one right completion, and which tokens of a completion are wrong against it.

Pure Python (no torch), so that the plots (`dps.png`) and the credit study (credit_study.py)
share one notion of a wrong token:

    wrong_tokens_of(["2", "3", "[EOS]"], "23", "24")    # -> [False, True, False]

A token is wrong where its characters differ from the gold completion at the same offset; a
token that is not part of the completion's text (EOS, padding) is wrong only when the
completion stopped before the gold one ended.
"""

from __future__ import annotations

ONE_ANSWER_TASKS = ("sudoku_tiny", "arithmetic")  # the solution grid; the number (then EOS)


def wrong_tokens_of(tokens: list[str], completion: str, gold: str) -> list[bool]:
    """Per token of `completion` (its decoded tokens, in order): does it differ from `gold` there?"""
    out, offset = [], 0
    for token in tokens:
        if token and completion.startswith(token, offset):
            out.append(completion[offset : offset + len(token)] != gold[offset : offset + len(token)])
            offset += len(token)
        else:  # a special token (EOS) the text does not hold
            out.append(offset < len(gold))
    return out
