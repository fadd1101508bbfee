"""The field's methods as bases (rl/bases/): each loss against a hand-computed case, each
estimator against its formula on a model whose log-probs are known, the ratio at lr 0, and the
gradient's sign on a planted two-completion group."""

import math

import pytest
import torch

from daca_bench.config import ConfigError, LossConfig, RLConfig, apply
from daca_bench.rl.bases import FIELD, check
from daca_bench.rl.bases.coupled import coupled_logprobs
from daca_bench.rl.bases.espo import espo_counts, espo_logprobs
from daca_bench.rl.bases.map import map_logprobs
from daca_bench.rl.bases.spg import spg_logprobs, spg_masks
from daca_bench.rl.losses import ADVANTAGES, LOSSES
from daca_bench.rl.lossparts import advantages_rloo

from repo_paths import ROOT

RATIO_BASED = ("espo", "coupled_grpo", "map")
CHANNELS = {"spg": 3, "map": 2, "tracerl": 2}


class Fixed:
    """A stand-in model: logits depend only on the position (table[pos]), never on the canvas."""

    def __init__(self, table, mask_id=99):
        self.table, self.mask_token_id, self.device = table, mask_id, torch.device("cpu")
        self.calls = 0

    def logits(self, ids, attn=None):
        self.calls += 1
        return self.table[: ids.shape[1]][None].expand(ids.shape[0], -1, -1).clone()


def _flat(V, P, L):
    return Fixed(torch.zeros(P + L, V))  # log p = -log V everywhere


def _args(n, P=2, L=6, V=5):
    return torch.ones(n, P, dtype=torch.long), torch.ones(n, P, dtype=torch.long), torch.randint(0, V, (n, L))


# ---- advantages ---------------------------------------------------------------------------
def test_leave_one_out_subtracts_the_others_mean_and_skips_failures():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, math.nan, 0.0, 0.0]])
    a = advantages_rloo(r).view(2, 4)
    assert torch.allclose(a[0], torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3]))
    assert torch.allclose(a[1], torch.tensor([1.0, 0.0, -0.5, -0.5]))  # the others among the scored


def test_wd1_weights_are_the_difference_of_two_group_softmaxes():
    c = ADVANTAGES["wd1"](torch.tensor([[1.0, 0.0]]), LossConfig())
    s = 1 / (1 + math.exp(-1))  # softmax of (0.5, -0.5)
    assert torch.allclose(c, torch.tensor([2 * (s - (1 - s)), -2 * (s - (1 - s))]))
    assert (ADVANTAGES["wd1"](torch.ones(1, 4), LossConfig()) == 0).all()  # no signal, no weight


# ---- losses against hand-computed cases -----------------------------------------------------
def test_wd1_loss_is_the_weighted_token_sum():
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -0.5]])
    loss, _ = LOSSES["wd1"](
        logp,
        None,
        None,
        torch.tensor([0.9, -0.9]),
        torch.ones(2, 2, dtype=torch.bool),
        torch.tensor([[2.0, 0.0], [1.0, 1.0]]),
        LossConfig(base="wd1"),
    )
    assert loss.item() == pytest.approx(-(0.9 * -2.0 + -0.9 * -1.0) / 2)


@pytest.mark.parametrize("mode, neg", [("eubo", -3.0), ("mix", 0.5 * -3.0 + 0.5 * -1.5), ("elbo", -1.5)])
def test_spg_loss_takes_the_lower_bound_for_positive_and_the_upper_for_negative_advantages(mode, neg):
    e = torch.tensor([[-1.0, -3.0, 0.0], [-1.0, -2.0, 0.0]])
    u = torch.tensor([[-9.0, -9.0, 0.0], [-2.0, -4.0, 0.0]])
    has = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    valid = torch.tensor([[True, True, False], [True, True, False]])
    loss, st = LOSSES["spg"](
        torch.stack([e, u, has], -1),
        None,
        None,
        torch.tensor([1.0, -1.0]),
        valid,
        torch.ones(2, 3),
        LossConfig(base="spg", spg_mode=mode),
    )
    # ELBO_0 = mean(-1, -3) = -2; row 1: ELBO -1.5, EUBO mean(-2, -4) = -3; both lengths 2
    assert loss.item() == pytest.approx(-(1.0 * 2 * -2.0 + -1.0 * 2 * neg) / 4)
    assert st["elbo"] == pytest.approx((-2.0 - 1.5) / 2)


def test_spg_guards_stop_on_a_nan_bound_and_stop_pushing_a_collapsed_token_down():
    valid = torch.ones(1, 2, dtype=torch.bool)
    logp = torch.tensor([[[-1.0, -30.0, 1.0], [-1.0, -2.0, 1.0]]], requires_grad=True)
    loss, st = LOSSES["spg"](
        logp,
        None,
        None,
        torch.tensor([-1.0]),
        valid,
        torch.ones(1, 2),
        LossConfig(base="spg", spg_mode="eubo", spg_floor=-20.0),
    )
    loss.backward()
    assert logp.grad[0, 0, 1] == 0 and logp.grad[0, 1, 1] > 0 and st["spg_floored"] == 0.5
    bad = torch.tensor([[[-1.0, math.nan, 1.0], [-1.0, -2.0, 1.0]]])
    with pytest.raises(FloatingPointError, match="spg_mode=mix"):
        LOSSES["spg"](
            bad, None, None, torch.tensor([-1.0]), valid, torch.ones(1, 2), LossConfig(base="spg", spg_mode="eubo")
        )


def test_espo_ratio_is_the_elbo_difference_over_the_canvas_length_with_k2_kl():
    e, old = torch.tensor([[-1.0, -1.0, -1.0, -1.0]]), torch.tensor([[-1.2, -1.2, -1.0, -1.0]])
    ref = old - 0.5
    cfg = LossConfig(base="espo", epsilon=0.2, beta=0.1)
    valid = torch.tensor([[True, True, False, False]])  # ESPO scores the whole canvas anyway
    loss, st = LOSSES["espo"](e, old, ref, torch.tensor([1.0]), valid, torch.ones(1, 4), cfg)
    s = math.exp(0.4 / 4)
    kl = (-4.0 - (-4.4 - 2.0)) ** 2 / 8
    assert loss.item() == pytest.approx(-s + 0.1 * kl, rel=1e-6) and st["kl"] == pytest.approx(kl)


def test_coupled_grpo_loss_is_grpo_on_its_estimator():
    logp, old = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1.0, -1.0]])
    args = (logp, old, None, torch.tensor([1.0]), torch.ones(1, 2, dtype=torch.bool), torch.ones(1, 2))
    loss, st = LOSSES["coupled_grpo"](*args, LossConfig(base="coupled_grpo", epsilon=0.5))
    assert loss.item() == pytest.approx(-(1.0 + min(math.exp(-1.0), 0.5)) / 2)  # min(r A, clip(r) A), A > 0
    assert st["clip_frac"] == 0 and st["clip_frac_any"] == 0.5  # below 1 - eps with A > 0: not the clip's region


def test_map_loss_adds_lambda_times_the_position_gspo():
    tok = torch.tensor([[-1.0, -1.0]])
    pos = torch.tensor([[-0.5, 0.0]])
    logp, old = torch.stack([tok, pos], -1), torch.stack([tok - 0.2, pos], -1)
    cfg = LossConfig(base="map", epsilon_seq=1.0, map_lambda=0.5)
    loss, _ = LOSSES["map"](
        logp, old, None, torch.tensor([2.0]), torch.ones(1, 2, dtype=torch.bool), torch.ones(1, 2), cfg
    )
    assert loss.item() == pytest.approx(-2.0 * math.exp(0.2) - 0.5 * 2.0)


# ---- estimators against their formulas -----------------------------------------------------
def test_spg_masks_keep_earlier_blocks_clean_mask_later_ones_and_everything_past_the_end():
    valid = torch.zeros(2, 8, dtype=torch.bool)
    valid[0, :7] = True
    valid[1, :3] = True
    hide = spg_masks(valid, block=4, draws=3, seq_ids=[0, 1], inner=0)
    for d in range(3):
        row = hide[d, 0]
        b = 0 if not row[:4].all() and row[:4].any() else 1
        if b == 1:
            assert not row[:4].any() and row[7]  # block 0 clean, past the end masked
            assert 1 <= int(row[4:7].sum()) <= 3
        else:
            assert row[4:].all() and 1 <= int(row[:4].sum()) <= 3
        assert hide[d, 1, 3:].all() and 1 <= int(hide[d, 1, :3].sum()) <= 3  # one block: m ~ U{1..3}


def test_spg_bounds_follow_their_formulas_on_known_log_probs():
    V, P, L = 5, 2, 6
    p, m, comp = _args(2, P, L, V)
    valid = torch.ones(2, L, dtype=torch.bool)
    valid[1, 4:] = False
    out = spg_logprobs(_flat(V, P, L), p, m, comp, valid=valid, block=3, draws=2, beta=1.5, seq_ids=[0, 1])
    hide = spg_masks(valid, 3, 2, [0, 1], 0)
    c = -math.log(V)
    for i in range(2):
        n = int(valid[i].sum())
        t = [(hide[d, i] & valid[i]).sum().item() / n for d in range(2)]
        for k in range(n):
            on = [bool(hide[d, i, k]) for d in range(2)]
            e = sum(c / t[d] for d in range(2) if on[d]) / 2
            assert out[i, k, 0].item() == pytest.approx(e, rel=1e-5)
            if any(on):
                u = math.log(sum(math.exp(1.5 * c) / t[d] for d in range(2) if on[d]) / 2) / 1.5
                assert out[i, k, 1].item() == pytest.approx(u, rel=1e-5) and out[i, k, 2] == 1
        assert (out[i, :n, 0].mean()).item() == pytest.approx(c, rel=1e-5)  # the ELBO of a flat model: log p


def test_espo_elbo_is_exact_on_a_flat_model_and_stratifies_the_mask_ratio_within_a_group():
    V, P, L, G = 5, 2, 6, 4
    p, m, comp = _args(G, P, L, V)
    ids = [(3, 0, g) for g in range(G)]
    e = espo_logprobs(_flat(V, P, L), p, m, comp, group_size=G, mc=1, seq_ids=ids)
    E = e.sum(1)
    c = -math.log(V)
    # 0 < x < L: both halves give c (L+1) / 2; x = 0 or L: one half holds every token
    assert all(v == pytest.approx(c * (L + 1), rel=1e-5) or v == pytest.approx(c * (L + 1) / 2, rel=1e-5) for v in E)
    assert (e != 0).all()  # every canvas position carries a term, past the end too
    x = espo_counts(L, G, ids, (0, 0))
    gaps = sorted((b - a) % (L + 1) for a, b in zip(x, x[1:] + x[:1]))
    assert len(set(x)) == G and max(gaps) - min(gaps) <= 1  # evenly spread over {0..L}, one k per group


def test_coupled_estimator_averages_the_all_masked_pass_and_the_weighted_pair():
    V, P, L = 5, 2, 6
    p, m, comp = _args(3, P, L, V)
    fake = _flat(V, P, L)
    out = coupled_logprobs(fake, p, m, comp, seq_ids=[0, 1, 2])
    c = -math.log(V)
    # per token: (c + c / t) / 2 or (c + c / (1 - t)) / 2 with t in (0.2, 0.8), one t per sequence
    for i in range(3):
        vals = sorted(set(round(v, 5) for v in out[i].tolist()))
        assert 1 <= len(vals) <= 2
        for v in vals:
            w = 2 * v / c - 1  # 1/t or 1/(1-t)
            assert 1 / 0.8 - 1e-4 <= w <= 1 / 0.2 + 1e-4
    assert fake.calls == 1  # the three passes run as one batch


def test_map_position_term_competes_with_the_later_blocks_largest_logits():
    P, L, V = 1, 3, 4
    table = torch.zeros(P + L, V)
    table[1] = torch.tensor([2.0, 0.0, 0.0, 0.0])
    table[2] = torch.tensor([0.0, 1.0, 0.0, 0.0])
    table[3] = torch.tensor([0.0, 0.0, 3.0, 0.0])
    comp = torch.tensor([[1, 1, 2]])
    commit = torch.tensor([[1, 2, 3]])
    out = map_logprobs(
        Fixed(table),
        torch.ones(1, P, dtype=torch.long),
        torch.ones(1, P, dtype=torch.long),
        comp,
        commit_step=commit,
        blocks=3,
    )
    z = [0.0, 1.0, 3.0]  # logit of each o_k
    c = [2.0, 1.0, 3.0]  # largest logit at each position
    pi0 = z[0] - math.log(math.exp(z[0]) + math.exp(c[1]) + math.exp(c[2]))
    pi1 = z[1] - math.log(math.exp(z[1]) + math.exp(c[2]))
    assert out[0, :, 1].tolist() == pytest.approx([pi0, pi1, 0.0], abs=1e-5)
    assert out[0, :, 0].tolist() == pytest.approx(
        torch.log_softmax(table[1:], -1)[[0, 1, 2], [1, 1, 2]].tolist(), abs=1e-5
    )


# ---- the gradient's sign on a planted two-completion group -----------------------------------
@pytest.mark.parametrize("base", sorted(FIELD))
def test_gradient_raises_the_rewarded_completion_and_lowers_the_other(base):
    torch.manual_seed(0)
    L = 4
    r = torch.tensor([[1.0, 0.0]])
    cfg = LossConfig(base=base, beta=0.0)
    adv = ADVANTAGES[base](r, cfg)
    C = CHANNELS.get(base)
    logp = -torch.rand(2, L, C) - 0.5 if C else -torch.rand(2, L) - 0.5
    if base == "spg":
        logp[..., 2] = 1.0  # every token masked in some draw
    if base == "tracerl":
        logp[..., 1] = torch.arange(L).float()  # each token its own round (a constant, no gradient)
    logp.requires_grad_(True)
    loss, _ = LOSSES[base](logp, logp.detach(), None, adv, torch.ones(2, L, dtype=torch.bool), torch.ones(2, L), cfg)
    loss.backward()
    g = logp.grad if not C else logp.grad[..., :2]
    assert (g[0] <= 0).all() and (g[0] < 0).any()  # descent raises the rewarded completion's likelihood
    assert (g[1] >= 0).all() and (g[1] > 0).any()  # and lowers the other's


# ---- the trainer: ratio exactly 1 at lr 0, no old passes for ratio-free bases ------------------
def _cfg(base, **over):
    cfg = {
        "train": {
            "task": "even_length",
            "steps": 1,
            "prompts_per_step": 2,
            "num_generations": 4,
            "n_eval": 4,
            "lr": 0.0,
            "save_every": 1,
            "threads": 1,
            "mu": 3,
        },
        "rollout": {"gen_length": 8, "block_length": 4, "steps": 4, "temperature": 1.0},
        "eval": {"gen_length": 8, "block_length": 4, "steps": 4},
        "sml": {"p_mask_prompt": 0.15},
        "loss": {"base": base, "beta": 0.0},
    }
    return apply(apply(RLConfig(), cfg), over)


@pytest.mark.parametrize("base", RATIO_BASED)
def test_at_lr_0_every_inner_ratio_is_exactly_one(monkeypatch, tmp_path, base):
    import daca_bench.train.trainer as tr

    seen, real = [], tr.LOSSES[base]

    def spy(logp, old, ref, adv, valid, w, lc):
        seen.append((logp - old).detach().abs().max().item())
        return real(logp, old, ref, adv, valid, w, lc)

    monkeypatch.setitem(tr.LOSSES, base, spy)
    over = {"loss.beta": 0.01} if base == "espo" else {}
    tr.train(_cfg(base, **over), tmp_path, progress=False)
    assert seen == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("base", ["wd1", "spg"])
def test_a_ratio_free_base_runs_no_old_passes(tmp_path, base):
    from daca_bench.train.trainer import train

    s = train(_cfg(base, **{"train.mu": 2}), tmp_path, progress=False)
    phases = s["ledger"]["phases"]  # canvases per phase: no old-policy pass at all, both inner updates' passes
    assert phases["likelihood_old"]["passes"] == 0 and phases["likelihood"]["passes"] > 0


@pytest.mark.parametrize(
    "base, over, msg",
    [
        ("spg", {"sml.k": 4}, "own likelihood"),
        ("map", {"sml.k": 2}, "own likelihood"),
        ("wd1", {"loss.beta": 0.04}, "no KL"),
        ("spg", {"loss.spg_mode": "up"}, "choose from"),
    ],
)
def test_a_variant_the_base_does_not_admit_is_one_clear_error(base, over, msg):
    with pytest.raises(ConfigError, match=msg):
        check(_cfg(base, **over))


def test_wd1_admits_sml_and_dps():
    check(_cfg("wd1", **{"sml.k": 4, "dps.enabled": True}))


# ---- tiny-bases: the compute-matched baseline and the design, as data --------------------------
def _cells(tmp_path, per_step):
    import json

    for variant, secs in per_step.items():
        for seed in (0, 1):
            cell = tmp_path / f"base=grpo_task=sudoku_tiny_variant={variant}_seed={seed}"
            cell.mkdir()
            rows = [
                {"seconds_rollout": secs[0], "seconds_likelihood_old": secs[1], "seconds_update": secs[2] + seed}
                for _ in range(3)
            ]
            (cell / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def test_compute_matched_baseline_runs_the_measured_cost_ratio_times_the_steps(tmp_path):
    from daca_bench.experiments.grid.bases_grid import compute_matched_arm, compute_matched_steps, measured_cost_ratio

    cells = _cells(tmp_path, {"baseline": (1.0, 0.5, 0.5), "+DACA": (1.0, 2.0, 2.5)})
    ratio = measured_cost_ratio(cells)  # (1 + 2 + 3) / (1 + 0.5 + 1) with the seeds' +0/+1 averaged
    assert ratio == pytest.approx(6.0 / 2.5)
    assert compute_matched_steps(32, ratio) == 77 and compute_matched_steps(32, 0.5) == 32
    base, name, variant, keys, extra = compute_matched_arm(32, ratio, {"baseline": {"train.lr": 1e-4}})
    assert (base, variant, keys["train.steps"], keys["train.lr"]) == ("grpo", "baseline", 77, 1e-4)
    assert extra == {"compute_ratio": round(ratio, 4), "base_steps": 32}  # recorded in the cell's axes.json
    with pytest.raises(ValueError):
        compute_matched_steps(32, 0)


def test_the_committed_cells_give_the_compute_matched_step_count():

    from daca_bench.experiments.grid.bases_grid import compute_matched_steps, measured_cost_ratio

    ratio = measured_cost_ratio(ROOT / "results" / "tiny-ablation" / "cells")
    assert 2.0 < ratio < 4.0 and compute_matched_steps(32, ratio) == round(32 * ratio)


def test_the_tiny_bases_design_is_disjoint_from_every_committed_seed_and_admits_only_real_variants(committed_seeds):
    from daca_bench.experiments.grid.bases_grid import (
        BASE_KEYS,
        BASE_VARIANTS,
        DACA_ROW,
        confirmatory_arms,
        selection_arms,
    )
    from daca_bench.experiments.grid.bases_grid import (
        TINY_BASES_DESIGN as D,
    )
    from daca_bench.experiments.grid.presets import PICKS

    used = committed_seeds(skip="tiny-bases")  # its own cells (seeds 16-23) are committed
    assert used and not set(D["confirmatory_seeds"]) & used and len(D["confirmatory_seeds"]) == 8
    assert not set(D["selection_seeds"]) & set(D["confirmatory_seeds"]) and D["selection_split"] == "dev"
    assert max(D["lr_grid"]) > 1e-4  # above today's top lr
    assert {p["base"] for p in D["primary"]} == set(BASE_VARIANTS) and D["alpha"] == 0.05
    for base, variants in BASE_VARIANTS.items():
        assert DACA_ROW[base] in variants
        for v in variants:  # every listed variant is admitted by its base; every other one is refused
            check(_cfg(base, **{**BASE_KEYS[base], "sml.k": 4 if "SML" in v or "DACA" in v else 1}))
        if "+SML" not in variants:
            with pytest.raises(ConfigError):
                check(_cfg(base, **{**BASE_KEYS[base], "sml.k": 4}))
    arms = confirmatory_arms(PICKS, 2.9)
    assert len(arms) == sum(map(len, BASE_VARIANTS.values())) + 1
    assert all(a[3].get("loss.base", a[0]) == a[0] for a in arms) and selection_arms()


def test_a_base_pick_overrides_the_shared_reading_and_unswept_rows_inherit_it():
    from daca_bench.experiments.grid.bases_grid import base_arms
    from daca_bench.experiments.grid.presets import PICKS

    picks = {
        **PICKS,
        "gspo": {"baseline": {"train.lr": 2e-4}, "+DACA": {"train.lr": 5e-5}},
        "spg": {"baseline": {"train.lr": 5e-5}, "+DPS": {"train.lr": 2e-4, "loss.spg_mix": 0.25}},
    }
    gspo = {name: keys for _, name, _, keys, _ in base_arms("gspo", picks)}
    assert gspo["+DPS"]["train.lr"] == 2e-4 and gspo["+DPS"]["dps.score"] == "progress"  # the baseline's lr
    assert gspo["+SML"]["train.lr"] == 5e-5 and gspo["+SML"]["sml.partition"] == "causal"  # +DACA's lr
    spg = {name: keys for _, name, _, keys, _ in base_arms("spg", picks)}
    assert set(spg) == {"baseline", "+DPS"} and spg["+DPS"]["loss.spg_mix"] == 0.25 and spg["+DPS"]["loss.beta"] == 0
