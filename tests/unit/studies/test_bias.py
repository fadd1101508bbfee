"""The bias study's mathematics on models small enough to enumerate; never which estimator wins."""

import itertools
import json
import math

import numpy as np
import pytest
import torch

from daca_bench.cli import main
from daca_bench.experiments.studies.bias import summarise
from daca_bench.rl.likelihood import elbo_logprobs, sml_logprobs
from daca_bench.rl.sampler import pad_prompts
from daca_bench.rl.strata import assign_strata


@pytest.fixture(scope="module")
def toy(tiny):
    p, m = pad_prompts(tiny, ["1+2=", "9-4="])
    comp = torch.tensor(
        [tiny.encode(["3ab"])[0] + [tiny.eos_token_id], tiny.encode(["5"])[0] + [tiny.eos_token_id] * 3]
    )
    return p, m, comp  # L = 4 positions


def _logp_given_hidden(tiny, p, m, comp, hide):
    canvas = torch.where(hide, torch.full_like(comp, tiny.mask_token_id), comp)
    logits = tiny.logits(torch.cat([p, canvas], 1), torch.cat([m, torch.ones_like(comp)], 1))[:, p.shape[1] :]
    return torch.log_softmax(logits, -1).gather(-1, comp[..., None]).squeeze(-1)  # (N, L)


@torch.no_grad()
def test_sml_with_two_random_strata_matches_direct_passes(tiny, toy):
    p, m, comp = toy
    strata = assign_strata(2, 4, 2, "random", seq_ids=[0, 1], inner=5, seed=3)
    want = torch.zeros(comp.shape)
    for j in range(2):
        want += torch.where(strata == j, _logp_given_hidden(tiny, p, m, comp, strata == j), torch.zeros(()))
    got = sml_logprobs(tiny, p, m, comp, k=2, seq_ids=[0, 1], inner=5, seed=3)
    assert torch.allclose(got, want, atol=1e-5)


@torch.no_grad()
def test_monte_carlo_elbo_converges_to_the_exhaustive_elbo(tiny, toy):
    p, m, comp = toy
    L = comp.shape[1]
    # exhaustive: l ~ U{1..L} (n_masked), a uniformly random subset of size l, weight L / l
    exact = torch.zeros(comp.shape[0])
    for n_masked in range(1, L + 1):
        subsets = list(itertools.combinations(range(L), n_masked))
        for s in subsets:
            hide = torch.zeros(comp.shape, dtype=torch.bool)
            hide[:, list(s)] = True
            exact += (L / n_masked) * (_logp_given_hidden(tiny, p, m, comp, hide) * hide).sum(1) / (L * len(subsets))
    draws = 4000
    per_draw = torch.stack([elbo_logprobs(tiny, p, m, comp, draws=1, seed=d).sum(1) for d in range(0, draws, 40)])
    mc = elbo_logprobs(tiny, p, m, comp, draws=draws, seed=0).sum(1)
    se = per_draw.std(0) / math.sqrt(draws)
    assert ((mc - exact).abs() < 4 * se + 1e-4).all(), (mc, exact, se)


def test_summary_statistics_on_known_values():
    rng = np.random.default_rng(0)
    ref_a = rng.normal(-10, 2, 50)
    ref_b = ref_a + rng.normal(0, 1, 50)
    L = 5
    est_a = np.stack([ref_a - 2.5 + d for d in (-0.5, 0.5)])  # bias -0.5 per token, sd over draws 0.5 / L
    est_b = est_a + (ref_b - ref_a)  # exact log-ratio
    row = summarise("x", 2, est_a, est_b, ref_a, ref_b, L)
    assert row["bias_per_token"] == pytest.approx(-0.5)
    assert row["sd_over_draws_per_token"] == pytest.approx(0.1)
    assert row["rank_corr"] == pytest.approx(1.0) and row["logratio_corr"] == pytest.approx(1.0)
    lo, hi = row["bias_ci"]
    assert lo <= -0.5 <= hi
    flipped = summarise("y", 2, est_a, est_a - (ref_b - ref_a), ref_a, ref_b, L)
    assert flipped["logratio_corr"] == pytest.approx(-1.0)


@pytest.mark.parametrize("reference", ["trajectory", "elbo"])
def test_command_runs_end_to_end_on_the_tiny_model(tmp_path, capsys, reference):
    out = tmp_path / "bias.json"
    code = main(
        [
            "likelihood-bias",
            "--model",
            "tiny",
            "--task",
            "arithmetic",
            "--n",
            "6",
            "--draws",
            "2",
            "--reference",
            reference,
            "--no-progress",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    table = capsys.readouterr().out
    assert "mean-field (K=1)" in table and "MC ELBO" in table
    data = json.loads(out.read_text())
    assert len(data["estimators"]) == 6 and data["meta"]["reference"] == reference
    assert (tmp_path / "bias.csv").exists() and (tmp_path / "bias.png").stat().st_size > 1000


def test_command_honours_model_and_sampler_overrides(tmp_path, capsys):
    out = tmp_path / "bias.json"
    assert (
        main(
            [
                "likelihood-bias",
                "--task",
                "arithmetic",
                "--n",
                "4",
                "--draws",
                "1",
                "--gen-length",
                "4",
                "sampler.steps=2",
                "model.hidden_size=32",
                "--no-progress",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    config = json.loads(out.read_text())["meta"]["config"]
    assert config["sampler"] == {
        **config["sampler"],
        "gen_length": 4,
        "block_length": 4,
        "steps": 2,
        "temperature": 0.9,
    }
    assert config["model"]["hidden_size"] == 32
