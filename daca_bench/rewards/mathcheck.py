"""Math answer equivalence: exact rationals for plain numbers, `math-verify` for the rest.

`equivalent(gold, answer, timeout=5.0)` is True iff the two answers are the same value. Plain
numbers (`72`, `1,000`, `-3.50`, `3/4`, `$72.`) compare as exact fractions; spellings equal
once formatting is stripped (`\\text{(C)}` and `C`) are equal; anything else goes through
math-verify (LaTeX and expressions, via sympy).

math-verify's own timeouts use signal.alarm, which raises outside the main thread, so they are
switched off here and this module enforces its own: in the main thread with an interval timer,
elsewhere by sending the check to a helper child process. A check past its time raises
MathTimeout (the task scores it 0 with status `timeout`).
"""

from __future__ import annotations

import json
import re
import select
import signal
import subprocess
import sys
import threading
from fractions import Fraction
from functools import lru_cache

MAX_CHARS = 2000  # longer answers are cut before sympy sees them (bounded work)


class MathTimeout(Exception):
    """The equivalence check ran past its time limit."""


class _Alarm(BaseException):  # BaseException: math-verify's `except Exception` must not eat it
    pass


_PLAIN = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:/(?:\d+))?")


def as_number(text: str) -> Fraction | None:
    """`72`, `-1,000.5`, `$72.`, `3/4`, `\\$5` -> Fraction; anything else -> None."""
    s = str(text).strip().replace("\u2212", "-").replace("\\$", "").replace("$", "")
    s = s.replace("\\!", "").replace("{,}", ",").strip().rstrip(".").strip()
    if not s or not _PLAIN.fullmatch(s) or not any(c.isdigit() for c in s.split("/")[0]):
        return None
    try:
        if "/" in s:
            num, den = s.split("/")
            return Fraction(num.replace(",", "")) / Fraction(den)
        return Fraction(s.replace(",", ""))
    except (ValueError, ZeroDivisionError):
        return None


_STRIP = [
    r"\left",
    r"\right",
    r"\!",
    r"\,",
    r"\;",
    r"\:",
    r"\displaystyle",
    r"^\circ",
    r"^{\circ}",
    "$",
    " ",
    "\n",
    "\t",
]


def normalize(text: str) -> str:
    """A formatting-free spelling used as the last, string-level comparison."""
    s = str(text)
    for tok in _STRIP:
        s = s.replace(tok, "")
    s = re.sub(r"\\(?:text|textbf|mathrm|mathbf|mbox|operatorname)\{([^{}]*)\}", r"\1", s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").rstrip(".")
    if re.fullmatch(r"\(([A-Za-z0-9]+)\)", s):
        s = s[1:-1]
    return s


_PROSE = re.compile(r"[A-Za-z]{3,}")


def _load_math_verify():
    """Import math-verify (and sympy) OUTSIDE any timer: an alarm inside an import would leave
    half-initialised modules behind."""
    import math_verify
    from math_verify import grader, parser

    grader.TIMEOUT_WARNING_SHOWN = parser.TIMEOUT_WARNING_SHOWN = True  # our own timer runs
    return math_verify


@lru_cache(maxsize=8192)
def _parse(text: str):
    """math-verify's reading of a string, cached: a group's G completions share one gold."""
    from math_verify import parse

    return tuple(parse(text, parsing_timeout=None))


# a number followed by plain unit words: `18 km/h`, `5 apples`, `$3.50 each` (no further digits)
_NUMBER_THEN_UNITS = re.compile(r"\s*([-+$\\\d.,/]*\d[\d.,/]*)\s*%?\s+[A-Za-z][A-Za-z/.^ ]*")


def _check(gold: str, answer: str) -> bool:
    gold, answer = str(gold)[:MAX_CHARS], str(answer)[:MAX_CHARS]
    answer = answer.replace("**", "").replace("__", "").replace("`", "").strip()  # markdown emphasis
    g, a = as_number(gold), as_number(answer)
    if g is not None and a is None:
        m = _NUMBER_THEN_UNITS.fullmatch(answer)
        a = as_number(m.group(1)) if m else None
    if g is not None and a is not None:
        return g == a
    if normalize(gold) == normalize(answer) != "":
        return True  # the same spelling up to formatting: no need for sympy
    from math_verify import verify

    gold_parsed = _parse("$" + gold + "$") or _parse("\\boxed{" + gold + "}")
    # Read the answer as math first; prose ("72 dollars") also by math-verify's extraction.
    readings = [_parse("$" + answer + "$")]
    if _PROSE.search(re.sub(r"\\[A-Za-z]+", " ", answer)):
        readings.append(_parse(answer))
    for parsed in readings:
        if gold_parsed and parsed and verify(list(gold_parsed), list(parsed), timeout_seconds=None):
            return True
    return False


def _check_with_alarm(gold: str, answer: str, timeout: float) -> bool | None:
    """Run _check in the main thread under an interval timer; None on timeout."""

    def on_alarm(signum, frame):
        raise _Alarm()

    if as_number(gold) is None or as_number(answer) is None:
        _load_math_verify()
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return _check(gold, answer)
    except _Alarm:
        return None
    except Exception:  # a sympy failure on odd input: not shown equivalent (as math-verify does)
        return False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class _Helper:
    """A child `python -m daca_bench.rewards.mathcheck` answering one JSON line per check. Used off the
    main thread, where no alarm can be set; the child runs every check in its main thread."""

    def __init__(self):
        self.proc = None
        self.lock = threading.Lock()

    def ask(self, gold: str, answer: str, timeout: float) -> bool | None:
        with self.lock:
            for _attempt in (0, 1):
                ready = True
                if self.proc is None or self.proc.poll() is not None:
                    self.proc = subprocess.Popen(
                        [sys.executable, "-m", "daca_bench.rewards.mathcheck"],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                try:
                    self.proc.stdin.write(json.dumps([gold, answer, timeout]) + "\n")
                    self.proc.stdin.flush()
                    ready, _, _ = select.select([self.proc.stdout], [], [], timeout + 60)
                    line = self.proc.stdout.readline() if ready else ""
                except (BrokenPipeError, OSError):
                    line = ""
                if line:
                    return json.loads(line)
                self.proc.kill()  # hung or died: start afresh (and retry once if it died)
                self.proc.wait()
                self.proc = None
                if not ready:
                    return None
            raise RuntimeError("math check helper process keeps dying")


_helper = _Helper()


def equivalent(gold: str, answer: str, timeout: float = 5.0) -> bool:
    """True iff `answer` is the same mathematical value as `gold`; MathTimeout past `timeout` s."""
    if threading.current_thread() is threading.main_thread():
        result = _check_with_alarm(gold, answer, timeout)
    else:
        result = _helper.ask(gold, answer, timeout)
    if result is None:
        raise MathTimeout(f"equivalence check over {timeout:g}s")
    return result


def score_math(gold: str, completion: str, timeout: float = 5.0):
    """The math reward: 1 iff the completion's answer (answers.math_answer) equals `gold`."""
    from .answers import math_answer
    from .scoring import correct_if, no_answer
    from .scoring import timeout as timed_out

    answer, rule = math_answer(completion)
    if answer is None:
        return no_answer(rule=rule)
    try:
        ok = equivalent(gold, answer, timeout)
    except MathTimeout:
        return timed_out(answer=answer[:200], rule=rule)
    return correct_if(ok, answer=answer[:200], gold=gold, rule=rule)


def _serve() -> None:
    for line in sys.stdin:
        gold, answer, timeout = json.loads(line)
        result = _check_with_alarm(gold, answer, timeout)
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()


# ---- d1's MATH match: a normalised string comparison (the classic MATH-dataset normalisation) ----
# Re-implemented from its behaviour so that d1's MATH number can be reported beside ours
# (`acc_d1`); our own verdict above stays math-verify's, which also accepts equal values
# written differently (0.5 and \frac{1}{2}, 2x+1 and 1+2x). docs/paper-presets.md compares the two.
class _D1Unreadable(Exception):
    """A step of d1's normalisation that fails on this string (d1 then compares the raw strings)."""


def _d1_units(s: str) -> str:
    if "\\text{ " not in s:
        return s
    parts = s.split("\\text{ ")
    if len(parts) != 2:
        raise _D1Unreadable("more than one unit")
    return parts[0]


def _d1_sqrt(s: str) -> str:
    if "\\sqrt" not in s:
        return s
    head, *rest = s.split("\\sqrt")
    for part in rest:
        if not part:
            raise _D1Unreadable("bare \\sqrt")
        head += "\\sqrt" + (part if part[0] == "{" else "{" + part[0] + "}" + part[1:])
    return head


def _d1_fracs(s: str) -> str:
    head, *rest = s.split("\\frac")
    for part in rest:
        head += "\\frac"
        if not part:
            raise _D1Unreadable("bare \\frac")
        if part[0] == "{":
            head += part
        elif len(part) < 2:
            return s
        elif part[1] == "{":
            head += "{" + part[0] + "}" + part[1:]
        else:
            head += "{" + part[0] + "}{" + part[1] + "}" + part[2:]
    return head


def _d1_slash(s: str) -> str:
    parts = s.split("/")
    if len(parts) != 2:
        return s
    try:
        a, b = int(parts[0]), int(parts[1])
    except ValueError as exc:  # d1 lets this escape, and then compares the raw strings
        raise _D1Unreadable("not a/b") from exc
    return f"\\frac{{{a}}}{{{b}}}" if s == f"{a}/{b}" else s


def d1_normalise(s: str) -> str:
    """d1's (and the MATH dataset's) answer normalisation; _D1Unreadable where it fails."""
    for old, new in (
        ("\n", ""),
        ("\\!", ""),
        ("\\\\", "\\"),
        ("tfrac", "frac"),
        ("dfrac", "frac"),
        ("\\left", ""),
        ("\\right", ""),
        ("^{\\circ}", ""),
        ("^\\circ", ""),
        ("\\$", ""),
    ):
        s = s.replace(old, new)
    s = _d1_units(s).replace("\\%", "").replace(" .", " 0.").replace("{.", "{0.")
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    sides = s.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:
        s = sides[1]
    s = _d1_fracs(_d1_sqrt(s).replace(" ", ""))
    if s == "0.5":
        s = "\\frac{1}{2}"
    return _d1_slash(s)


def d1_equivalent(answer: str | None, gold: str | None) -> bool:
    """d1's MATH verdict: equal after d1_normalise (the raw strings when normalising fails)."""
    if answer is None or gold is None:
        return answer is None and gold is None
    try:
        return d1_normalise(answer) == d1_normalise(gold)
    except _D1Unreadable:
        return answer == gold
