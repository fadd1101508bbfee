import math

import pytest
import torch

from daca_bench.rl.credit import DPSConfig, dps_weights, step_progress
from daca_bench.rl.losses import ADVANTAGES, LOSSES, LossConfig
from daca_bench.rl.sampler import Trajectory

nan = math.nan


def _traj():
    # 3 positions, 3 steps: position 0 committed at step 1, 2 at step 2, 1 at step 3
    conf = torch.tensor([[[0.5, 0.2, 0.4], [nan, 0.6, 0.5], [nan, 0.9, nan]]])
    return Trajectory(torch.tensor([[1, 3, 2]]), torch.log(torch.tensor([[0.5, 0.9, 0.5]])), conf)


def test_progress_is_the_mean_confidence_gain_over_what_was_masked_committed_counting_as_one():
    g = step_progress(_traj())
    # step 1: (1 - 0.5) + (0.6 - 0.2) + (0.5 - 0.4); step 2: (0.9 - 0.6) + (1 - 0.5); the last step is scored too
    assert torch.allclose(g, torch.tensor([[1.0 / 3, 0.4, 1 - 0.9]]))


def _random_traj(N=6, T=8, L=8):
    torch.manual_seed(0)
    commit = torch.stack([torch.randperm(L) + 1 for _ in range(N)])
    conf = torch.rand(N, T, L)
    conf[torch.arange(1, T + 1)[None, :, None].expand(N, T, L) > commit[:, None, :]] = nan
    return Trajectory(commit, -torch.rand(N, L) * 3, conf)


@pytest.mark.parametrize("norm", ["rank", "zscore", "ratio"])
@pytest.mark.parametrize("score", ["progress", "surprise", "commit_time", "random"])
def test_weights_have_mean_one_and_respect_the_clip(score, norm):
    N, L = 6, 8
    traj = _random_traj(N, 8, L)
    valid = torch.ones(N, L, dtype=torch.bool)
    valid[0, 5:] = False
    cfg = DPSConfig(enabled=True, score=score, norm=norm, lam=2.0, w_min=0.5, w_max=1.5)
    w = dps_weights(traj, valid, cfg)
    for i in range(N):
        v = w[i][valid[i]]
        assert abs(v.mean().item() - 1) < 1e-5
        assert v.max() / v.min() <= cfg.w_max / cfg.w_min + 1e-5  # clipped before the mean-1 rescale
    assert (w[0, 5:] == 1).all()
    with pytest.warns(UserWarning, match="enabled=True"):
        assert torch.equal(dps_weights(traj, valid, DPSConfig(enabled=False)), torch.ones(N, L))


def test_random_control_has_mean_one_the_requested_spread_and_no_information():
    N, L = 64, 16
    traj = _random_traj(N, 9, L)
    valid = torch.ones(N, L, dtype=torch.bool)
    for lam in (0.25, 0.5):
        cfg = DPSConfig(enabled=True, score="random", norm="rank", lam=lam, w_min=0.0, w_max=10.0)
        w = dps_weights(traj, valid, cfg, seq_ids=range(N), seed=1)
        assert torch.allclose(w.mean(1), torch.ones(N), atol=1e-5)
        # ranks of L distinct draws: std lam * sqrt(1 - 1/L^2) exactly, whatever the draws
        assert torch.allclose(w.std(1, unbiased=False), torch.full((N,), lam * (1 - 1 / L**2) ** 0.5), atol=1e-4)
        # the same spread as a real reading under the same normalisation
        real = dps_weights(
            traj, valid, DPSConfig(enabled=True, score="surprise", norm="rank", lam=lam, w_min=0.0, w_max=10.0)
        )
        assert torch.allclose(real.std(1, unbiased=False), w.std(1, unbiased=False), atol=1e-4)
    # no information: uncorrelated with the commit step, and keyed by the sequence id, not the batch
    w = dps_weights(traj, valid, DPSConfig(enabled=True, score="random"), seq_ids=range(N), seed=1)
    r = torch.corrcoef(torch.stack([w.flatten(), traj.commit_step.flatten().float()]))[0, 1]
    assert abs(r) < 0.1
    again = dps_weights(
        Trajectory(traj.commit_step[5:7], traj.commit_logp[5:7], traj.conf[5:7]),
        valid[5:7],
        DPSConfig(enabled=True, score="random"),
        seq_ids=[5, 6],
        seed=1,
    )
    assert torch.equal(again, w[5:7])


def test_unknown_score_is_an_error():
    with pytest.raises(ValueError, match="dps.score"):
        dps_weights(_traj(), torch.ones(1, 3, dtype=torch.bool), DPSConfig(enabled=True, score="progres"))


@pytest.mark.parametrize("base", ["grpo", "reinforce_pp"])
def test_group_advantages_sum_to_zero_and_skip_infra_failures(base):
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [1.0, nan, 0.0, 0.0]])
    adv = ADVANTAGES[base](r, LossConfig(base=base)).view(3, 4)
    if base == "grpo":
        assert torch.allclose(adv.sum(1), torch.zeros(3), atol=1e-6)
        assert (adv[1] == 0).all()  # zero-variance group
    else:
        assert abs(adv.sum().item()) < 1e-5  # normalised over the batch
    assert adv[2, 1] == 0  # the unscored sample contributes nothing
    assert torch.isfinite(adv).all()


@pytest.mark.parametrize("base", ["grpo", "gspo", "reinforce_pp"])
def test_zero_variance_group_contributes_no_gradient(base):
    logp = torch.randn(4, 5, requires_grad=True)
    adv = ADVANTAGES[base](torch.ones(1, 4), LossConfig(base=base))
    if base == "reinforce_pp":
        assert (adv == 0).all()
    loss, _ = LOSSES[base](
        logp, logp.detach(), None, adv, torch.ones(4, 5, dtype=torch.bool), torch.ones(4, 5), LossConfig(base=base)
    )
    loss.backward()
    assert torch.count_nonzero(logp.grad) == 0


@pytest.mark.parametrize("base", ["grpo", "gspo", "reinforce_pp"])
def test_on_policy_gradient_is_advantage_weighted_log_prob_gradient(base):
    """At ratio 1 every base reduces to -(A * w * dlogp) averaged: check the sign and the DPS weighting."""
    logp = torch.zeros(2, 3, requires_grad=True)
    adv = torch.tensor([1.0, -1.0])
    w = torch.tensor([[2.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    loss, stats = LOSSES[base](
        logp, logp.detach(), None, adv, torch.ones(2, 3, dtype=torch.bool), w, LossConfig(base=base)
    )
    loss.backward()
    g = logp.grad
    assert (g[0, :2] < 0).all() and g[0, 2] == 0 and (g[1] > 0).all()  # descent raises logp where A > 0
    assert torch.isclose(g[0, 0], 2 * g[0, 1]) and stats["clip_frac"] == 0


def test_k3_kl_is_zero_at_the_reference_and_positive_elsewhere():
    logp = torch.log(torch.tensor([[0.5, 0.2]]))
    cfg = LossConfig(beta=0.1)
    valid = torch.ones(1, 2, dtype=torch.bool)
    _, same = LOSSES["grpo"](logp, logp, logp, torch.zeros(1), valid, torch.ones(1, 2), cfg)
    _, diff = LOSSES["grpo"](logp, logp, logp - 0.3, torch.zeros(1), valid, torch.ones(1, 2), cfg)
    assert same["kl"] == 0 and diff["kl"] > 0


def test_clip_frac_counts_only_where_the_clip_binds_for_the_advantage_sign():
    """TRL's clip_ratio/region_mean: low with A < 0, high with A > 0; clip_frac_any counts every ratio outside."""
    logp = torch.zeros(2, 2)
    old = torch.tensor([[-1.0, 1.0], [-1.0, 1.0]])  # ratios e (high) and 1/e (low) in each row
    valid = torch.ones(2, 2, dtype=torch.bool)
    _, st = LOSSES["grpo"](logp, old, None, torch.tensor([1.0, -1.0]), valid, torch.ones(2, 2), LossConfig(epsilon=0.2))
    assert st["clip_frac"] == 0.5 and st["clip_frac_any"] == 1.0  # row 0 high (A > 0), row 1 low (A < 0)
    _, none = LOSSES["grpo"](
        logp, old, None, torch.tensor([1.0, -1.0]) * 0, valid, torch.ones(2, 2), LossConfig(epsilon=0.2)
    )
    assert none["clip_frac"] == 0.0 and none["clip_frac_any"] == 1.0


@pytest.mark.parametrize("unbiased, expected", [(True, 0.5 / math.sqrt(0.5)), (False, 1.0)])
def test_scale_rewards_divides_by_the_unbiased_group_std_unless_told_otherwise(unbiased, expected):
    adv = ADVANTAGES["grpo"](torch.tensor([[1.0, 0.0]]), LossConfig(scale_rewards=True, std_unbiased=unbiased))
    assert adv[0].item() == pytest.approx(expected, rel=1e-3)
