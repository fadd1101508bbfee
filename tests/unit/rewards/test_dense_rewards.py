"""Dense training rewards (train.reward=dense): partial credit for wrong answers, at most half of
a correct one, the status unchanged (the test metric stays exact match), unscorable stays unscored."""

import pytest

from daca_bench.config import ConfigError, RLConfig, apply
from daca_bench.registry import get_task
from daca_bench.rewards.scoring import PARTIAL_WEIGHT, digit_credit
from daca_bench.train.trainer import training_task


def _pair(name):
    return get_task(name, split="train", n=4, seed=0, shaping="dense"), get_task(
        name, split="test", n=1, seed=0
    ).samples[0]


@pytest.mark.parametrize(
    "name,better,worse",
    [
        ("arithmetic", "31", "7"),  # gold 30: one digit right beats none
        ("countdown_tiny", "3+4+9", "3*4+99"),  # 9 3 4 -> 21: all numbers, 16 beats a wrong number
        ("sudoku_tiny", "1234342143122144", "3412213412434321"),  # one cell off beats givens changed
        ("json_tiny", '{"id":1}', '{"x":1}'),  # the right key beats a wrong one
    ],
)
def test_closer_wrong_answers_earn_more_and_never_as_much_as_correct(name, better, worse):
    task, sample = _pair(name)
    exact = get_task(name, split="test", n=1, seed=0)
    good, bad, gold = task.verify(sample, better), task.verify(sample, worse), task.verify(sample, sample.target)
    assert gold.value == 1.0 and gold.status == "correct"
    assert 0 <= bad.value < good.value <= PARTIAL_WEIGHT
    assert good.status == exact.verify(sample, better).status != "correct"  # the status is the exact one
    assert exact.verify(sample, better).value == 0.0


def test_digit_credit_aligns_from_the_right():
    assert digit_credit("30", "30") == 1.0 and digit_credit("30", "31") == 0.5
    assert digit_credit("130", "30") == pytest.approx(2 / 3) and digit_credit("30", None) == 0.0


def test_unscorable_stays_unscored_and_empty_earns_nothing():
    task, sample = _pair("countdown_tiny")
    assert task.verify(sample, "").value == 0.0
    json_task = get_task("json_tiny", split="train", n=1, seed=0, shaping="dense")
    broken = type(sample)(id="x", prompt="", target="", metadata={"schema": {"type": "nonsense"}})
    r = json_task.verify(broken, "{}")
    assert not r.scored and r.status == "bad_input" and "partial" not in r.details


def test_training_task_picks_the_reward_and_refuses_a_task_without_it():
    cfg = apply(RLConfig(), {"train.task": "sudoku_tiny", "train.reward": "dense"})
    task = training_task(cfg)
    sample = task.samples[0]
    assert 0 < task.verify(sample, sample.target[:-1] + "0").value < 1 or sample.target.endswith("0")
    with pytest.raises(ConfigError, match="train.reward=d1"):
        training_task(apply(RLConfig(), {"train.task": "python_tiny", "train.reward": "d1"}))
    with pytest.raises(ConfigError, match="train.reward"):
        training_task(apply(RLConfig(), {"train.reward": "shaped"}))


@pytest.mark.parametrize("name,shaping", [("gsm8k", "dense"), ("arithmetic", "d1"), ("json_tiny", "d1")])
def test_a_shaping_the_task_does_not_define_is_an_error_not_the_exact_reward(name, shaping):
    with pytest.raises(ValueError, match=f"no '{shaping}' shaping"):
        get_task(name, split="test", records=[], shaping=shaping)
