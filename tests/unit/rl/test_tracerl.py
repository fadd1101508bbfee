"""TraceRL as a base (rl/bases/tracerl.py): its advantages, trace likelihood and loss equal to the numbers
TraceRL's own code computes (tests/fixtures/golden/tracerl.pt, scripts/golden_tracerl.py: Gen-Verse/dLLM-RL
@10b4fd1 run on the tiny block model), its rounds on a hand case, its errors, and a short training run on the
tiny block model with the ratio exactly 1 at lr 0."""

import json

import pytest
import torch

from daca_bench.config import ConfigError, LossConfig, ModelConfig, RLConfig, apply
from daca_bench.models import load_model
from daca_bench.rl.bases import FIELD, check
from daca_bench.rl.bases.tracerl import advantages_tracerl, loss_tracerl, trace_rounds, trace_rows, tracerl_logprobs
from daca_bench.rl.losses import ADVANTAGES, LOSSES

from repo_paths import FIXTURES


@pytest.fixture(scope="module")
def golden():
    torch.set_num_threads(1)
    g = torch.load(FIXTURES / "golden" / "tracerl.pt")
    adapter = load_model(ModelConfig(**g["model"]))
    adapter.model.eval()
    return g, adapter


def _logp(adapter, g, weights, shrink):
    adapter.model.load_state_dict(weights)
    with torch.no_grad():
        return tracerl_logprobs(
            adapter, g["prompt_ids"], g["prompt_mask"], g["completion"], commit_step=g["commit_step"], shrink=shrink
        )


def test_advantages_are_tracerls_z_scores(golden):
    g, _ = golden
    assert torch.allclose(advantages_tracerl(g["rewards"][None]), g["advantages"].float(), atol=1e-6)
    assert ADVANTAGES["tracerl"] is advantages_tracerl
    # a group with one reward gets 0 (TraceRL: std 0), an unscored member 0 and no say in the others'
    assert advantages_tracerl(torch.tensor([[1.0, 1.0]])).tolist() == [0.0, 0.0]
    a = advantages_tracerl(torch.tensor([[1.0, 0.0, float("nan")]]))
    assert a.tolist() == pytest.approx([1.0, -1.0, 0.0])


@pytest.mark.parametrize("case", [0, 1, 2])
def test_likelihood_rows_and_loss_equal_tracerls_own_code(golden, case):
    g, adapter = golden
    c = g["cases"][case]
    valid = g["completion"] != adapter.pad_token_id
    old, new = _logp(adapter, g, g["old"], c["shrink"]), _logp(adapter, g, g["new"], c["shrink"])
    assert c["logp_new"].isnan().eq(~valid).all()  # TraceRL scores every valid token once, padding never
    assert (old[..., 0] - c["logp_old"])[valid].abs().max() < 1e-5
    assert (new[..., 0] - c["logp_new"])[valid].abs().max() < 1e-5
    assert int(trace_rows(new[..., 1], valid)) == c["rows"]
    cfg = LossConfig(base="tracerl", epsilon=c["eps"], trace_kl=c["beta"], trace_shrink=c["shrink"])
    loss, stats = LOSSES["tracerl"](new, old, None, g["advantages"].float(), valid, torch.ones(valid.shape), cfg)
    assert loss.item() == pytest.approx(c["loss"], abs=1e-5)
    assert 0 <= stats["clip_frac"] <= 1 and stats["kl"] > 0


def test_rounds_rank_each_blocks_distinct_steps_and_shrink_merges_them():
    steps = torch.tensor([[3, 1, 3, 7, 2, 2, 9, 4]])
    assert trace_rounds(steps, 4).tolist() == [[1, 0, 1, 2, 0, 0, 2, 1]]
    assert trace_rounds(steps, 4, shrink=2).tolist() == [[0, 0, 0, 1, 0, 0, 1, 0]]
    assert trace_rounds(steps, 8).tolist() == [[2, 0, 2, 4, 1, 1, 5, 3]]
    with pytest.raises(ValueError, match="whole blocks"):
        trace_rounds(steps, 3)


def test_dps_weights_scale_each_tokens_term_and_the_rounds_carry_no_gradient():
    lp = torch.tensor([[[-1.0, 0.0], [-2.0, 1.0]]], requires_grad=True)
    old = lp.detach().clone()
    old[..., 0] -= 0.1
    w = torch.tensor([[2.0, 0.0]])
    cfg = LossConfig(base="tracerl", epsilon=0.5, trace_kl=0.0)
    loss, _ = loss_tracerl(lp, old, None, torch.tensor([1.0]), torch.ones(1, 2, dtype=torch.bool), w, cfg)
    loss.backward()
    r = torch.tensor(0.1).exp().item()  # rows R = 2, L = 2
    assert loss.item() == pytest.approx(-(2 * r) / 4)
    assert lp.grad[0, :, 0].tolist() == pytest.approx([-2 * r / 4, 0.0]) and lp.grad[..., 1].abs().sum() == 0


def _cfg(**over):
    cfg = {
        "model": {"block_size": 4},
        "train": {
            "task": "even_length",
            "steps": 1,
            "prompts_per_step": 2,
            "num_generations": 2,
            "n_eval": 4,
            "lr": 0.0,
            "save_every": 1,
            "threads": 1,
            "mu": 2,
        },
        "rollout": {"gen_length": 8, "block_length": 4, "steps": 4, "temperature": 1.0, "cache": "block"},
        "eval": {"gen_length": 8, "block_length": 4, "steps": 4, "cache": "block"},
        "dps": {"enabled": True, "scope": "block"},
        "loss": {"base": "tracerl", "beta": 0.0},
    }
    return apply(apply(RLConfig(), cfg), over)


@pytest.mark.parametrize(
    "over, msg",
    [({"model.block_size": 0}, "block model"), ({"sml.k": 2}, "own likelihood"), ({"loss.beta": 0.04}, "no KL")],
)
def test_a_variant_tracerl_does_not_admit_is_one_clear_error(over, msg):
    with pytest.raises(ConfigError, match=msg):
        check(_cfg(**over))
    assert not FIELD["tracerl"].sml and not FIELD["tracerl"].ratio_free


def test_trains_the_tiny_block_model_with_the_ratio_exactly_one_at_lr_0(monkeypatch, tmp_path):
    import daca_bench.train.trainer as tr

    seen, real = [], tr.LOSSES["tracerl"]

    def spy(logp, old, ref, adv, valid, w, lc):
        seen.append((logp - old)[..., 0].detach().abs().max().item())
        assert torch.equal(logp[..., 1], old[..., 1])  # the same rounds: the sampler's own trace
        return real(logp, old, ref, adv, valid, w, lc)

    monkeypatch.setitem(tr.LOSSES, "tracerl", spy)
    tr.train(_cfg(**{"train.steps": 2, "train.lr": 0.0}), tmp_path / "lr0", progress=False)
    assert seen == [0.0] * 4
    tr.train(_cfg(**{"train.steps": 2, "train.lr": 1e-3}), tmp_path / "run", progress=False)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(r["loss"] == r["loss"] for r in rows)
