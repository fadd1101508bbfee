"""The estimator study (`daca-bench estimators`): its statistics on planted cases and one small
end-to-end run on real tiny models; never which estimator wins."""

import csv
import json

import numpy as np
import pytest
import torch

from daca_bench.cli import main
from daca_bench.config import RunConfig, SamplerConfig, apply
from daca_bench.experiments.studies.credit_study import auc_with_interval, gold_target, token_auc
from daca_bench.experiments.studies.gradients import (
    Estimator,
    cosine_and_ratio,
    estimators,
    exact_estimator,
    gradient_rows,
    gram,
    rollouts,
)
from daca_bench.registry import get_task
from daca_bench.rl.credit import SCORES


@pytest.fixture(scope="module")
def sft_arithmetic(tmp_path_factory):
    """The tiny model after a short masked-diffusion SFT on arithmetic: it writes numbers and EOS, so
    that its rollouts earn different dense rewards (GRPO signal)."""
    from daca_bench.train.sft import train_sft

    out = tmp_path_factory.mktemp("sft")
    cfg = apply(
        RunConfig(),
        {
            "sampler": {"gen_length": 4, "block_length": 4, "steps": 2},
            "sft": {"n_train": 512, "n_eval": 8, "batch_size": 32, "steps": 80, "lr": 2e-3, "save_every": 1000},
        },
    )
    train_sft(cfg, out, progress=False)
    return out / "final"


@pytest.fixture(scope="module")
def study(sft_arithmetic, tmp_path_factory):
    out = tmp_path_factory.mktemp("est") / "out"
    code = main(
        [
            "estimators",
            "--tasks",
            "arithmetic",
            "sudoku_tiny",
            "--sft-dir",
            "",
            "--model",
            f"arithmetic:sft={sft_arithmetic}",
            "--model",
            "sudoku_tiny=tiny",
            "--prompts",
            "4",
            "--group",
            "4",
            "--draws",
            "2",
            "--mu",
            "1",
            "--lr",
            "1e-3",
            "--gen-length",
            "4",
            "--workers",
            "2",
            "--no-progress",
            "--output-dir",
            str(out),
        ]
    )
    assert code == 0
    return out


def test_command_writes_every_table(study):
    data = json.loads((study / "estimators.json").read_text())
    assert [(s["meta"]["task"], s["meta"]["model"]) for s in data["studies"]] == [
        ("arithmetic", "sft"),
        ("sudoku_tiny", "tiny"),
    ]
    want = [e.name for e in estimators(4, 2)]
    for s in data["studies"]:
        assert [r["estimator"] for r in s["gradients"]] == want
        assert [c["score"] for c in s["credit"]] == list(SCORES)  # both tasks know their wrong tokens
        assert s["meta"]["exact_vs_commit_logp_max_abs"] < 1e-5  # the reference is the recorded decode order
    rows = list(csv.DictReader(open(study / "gradients.csv")))
    assert len(rows) == 2 * len(want) and {"cosine_lo", "cosine_hi", "logratio_corr", "seconds"} <= set(rows[0])
    credit = list(csv.DictReader(open(study / "credit.csv")))
    assert len(credit) == 2 * len(SCORES) and {"auc_lo", "auc_within_step", "cosine_weighted_vs_plain"} <= set(
        credit[0]
    )
    assert "| estimator |" in (study / "estimators.md").read_text()
    assert (study / "gradients.png").stat().st_size > 5000


def test_exact_row_has_cosine_one(study):
    s = json.loads((study / "estimators.json").read_text())["studies"][0]
    assert s["meta"]["groups_with_signal"] > 0, "the SFT'd model should earn different rewards within a group"
    exact = s["gradients"][-1]
    assert exact["estimator"].startswith("causal K=T=2")
    assert exact["cosine"] == pytest.approx(1.0, abs=1e-6) and exact["norm_ratio"] == pytest.approx(1.0, abs=1e-6)
    assert exact["logratio_corr"] == pytest.approx(1.0, abs=1e-6)
    lo, hi = exact["cosine_ci"]
    assert lo == pytest.approx(1.0, abs=1e-6) and hi == pytest.approx(1.0, abs=1e-6)
    mean_field = s["gradients"][0]
    assert mean_field["cosine"] < 0.999  # a different likelihood gives a different gradient


def test_bad_model_spec_and_missing_model_end_in_one_line(capsys, tmp_path):
    assert (
        main(
            [
                "estimators",
                "--tasks",
                "arithmetic",
                "--sft-dir",
                "",
                "--model",
                "nonsense",
                "--output-dir",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "TASK[:LABEL]=PATH" in capsys.readouterr().err
    assert (
        main(["estimators", "--tasks", "arithmetic", "--sft-dir", str(tmp_path), "--output-dir", str(tmp_path / "o")])
        == 2
    )
    assert "no model for arithmetic" in capsys.readouterr().err


@torch.no_grad()
def test_cosine_from_gram_matrices_equals_the_resampled_sums():
    gen = torch.Generator().manual_seed(0)
    est, ref = torch.randn(5, 40, generator=gen), torch.randn(5, 40, generator=gen)
    counts = np.array([[2, 0, 1, 1, 1], [0, 0, 5, 0, 0]], float)
    cos, ratio = cosine_and_ratio(counts, gram(est, ref), gram(est, est), gram(ref, ref))
    for c, want_cos, want_ratio in zip(counts, cos, ratio):
        e, x = (torch.tensor(c)[:, None] * est.double()).sum(0), (torch.tensor(c)[:, None] * ref.double()).sum(0)
        assert want_cos == pytest.approx(float(e @ x / (e.norm() * x.norm())))
        assert want_ratio == pytest.approx(float(e.norm() / x.norm()))


def test_gradients_of_the_exact_estimator_against_themselves(sft_arithmetic):
    """On real rollouts with planted advantages: the exact row is exactly 1, the mean field is not."""
    from daca_bench.config import ModelConfig
    from daca_bench.models import load_model

    tiny = load_model(ModelConfig(name=str(sft_arithmetic)))
    task = get_task("arithmetic", split="train", n=3)
    ro = rollouts(
        tiny,
        list(task.samples),
        task,
        SamplerConfig(gen_length=4, block_length=4, steps=2, temperature=0.9),
        group=3,
        seed=0,
    )
    ro.adv = torch.randn(len(ro.samples), generator=torch.Generator().manual_seed(1))
    table = [Estimator("mean field", "mean field", 1, False, 1, "strided"), exact_estimator(ro.T)]
    rows, kept = gradient_rows(tiny, ro, table, draws=2)
    assert rows[1]["cosine"] == pytest.approx(1.0, abs=1e-6) and rows[1]["cosine_sd_draws"] == 0
    assert rows[0]["cosine"] < 0.999
    assert kept["exact"].shape == (3, sum(p.numel() for p in tiny.model.parameters()))
    lo, hi = rows[0]["cosine_ci"]
    assert lo <= rows[0]["cosine"] + 1e-9 and rows[0]["cosine"] <= hi + 1e-9


def test_auc_on_planted_scores():
    rng = np.random.default_rng(0)
    wrong = rng.random((60, 10)) < 0.3
    valid = np.ones_like(wrong)
    assert token_auc(wrong.astype(float).ravel(), wrong.ravel()) == 1.0  # weight = wrongness
    assert token_auc(-wrong.astype(float).ravel(), wrong.ravel()) == 0.0
    auc, (lo, hi) = auc_with_interval(rng.random(wrong.shape), wrong, valid)
    assert lo < 0.5 < hi and abs(auc - 0.5) < 0.1  # a score with no information
    auc, (lo, hi) = auc_with_interval(wrong + rng.normal(0, 0.5, wrong.shape), wrong, valid)
    assert 0.5 < lo <= auc <= hi
    # a score that only knows the commit step, where wrong tokens come late: high AUC, none within a step
    step = np.tile(np.arange(10), (60, 1))
    late = rng.random(wrong.shape) < step / 10
    assert auc_with_interval(step.astype(float), late, valid)[0] > 0.8
    assert (
        np.isnan(auc_with_interval(step.astype(float), late, valid, groups=step)[0])
        or auc_with_interval(step.astype(float), late, valid, groups=step)[0] == 0.5
    )


def test_gold_canvas_is_the_answer_then_eos(tiny):
    arith = next(s for s in get_task("arithmetic", split="test").samples if len(str(s.target)) == 2)
    ids = gold_target(tiny, arith, 4)
    assert ids[:2] == tiny.encode([arith.target])[0] and ids[2:] == [tiny.eos_token_id] * 2
    sudoku = next(iter(get_task("sudoku_tiny", split="test", n=1).samples))
    assert tiny.decode(gold_target(tiny, sudoku, 18)) == sudoku.metadata["solution"]
