"""Unit-test double: a dense reward (1 iff the completion has an even, non-zero length), so that
trainer tests see non-zero advantages from an untrained model. Never used outside tests."""

from daca_bench.registry import register_task
from daca_bench.types import CORRECT, NO_ANSWER, WRONG, Reward, Sample, Task


def verify(sample, completion):
    if not completion:
        return Reward(0.0, NO_ANSWER)
    ok = len(completion) % 2 == 0
    return Reward(float(ok), CORRECT if ok else WRONG)


@register_task("even_length", family="math", version=1, description="test double: even-length completions")
def even_length(split="test", n=None, seed=0, **_):
    n = n or 32
    samples = [Sample(id=f"even/{split}/{i}", prompt=f"{i}{split[:2]}=", target="ab") for i in range(n)]
    return Task("even_length", "math", 1, samples, verify, split)
