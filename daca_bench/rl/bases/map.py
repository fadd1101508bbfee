"""MAP, mask-aware policy gradients (Haran71/mask-aware-policy-gradients @a7ff19d): GSPO on the
step-merged trajectory likelihood plus lambda times GSPO on an unmasking-position likelihood.

    A = leave-one-out; beta = 0                                  (map/configs/gsm8k.yaml)
    s_tok = exp(sum_k w_k (l_k - l_old_k) / sum_k w_k)           (map/policy_losses.py, _gspo_partial)
    s_pos = exp(sum_k w_k (pi_k - pi_old_k) / sum_k w_k)
    loss = -mean_i min(s A, clip(s) A) over s_tok, + lambda x the same over s_pos

The likelihood is `sml.partition=causal` with K = `loss.map_blocks` (StepMerge: the pass of block
j masks every token committed in block j or later, and scores block j's tokens). The position
term (map/position_likelihood.py, compute_position_logprobs_softmax, scope `segment`, max-logit
confidence, tau 1) is pi_k = z_k - log(exp z_k + sum_{m in later blocks} exp c_m), z_k the logit
of o_k and c_m the largest logit at m, from the same pass. DPS weights both means.
"""

from __future__ import annotations

import torch

from ..likelihood import LOGIT_CHUNK, target_logprobs
from ..lossparts import advantages_rloo, clip_stats
from ..strata import agreed_levels, assign_strata, mask_prompts

__all__ = ["advantages_rloo", "estimator", "loss_map", "map_logprobs"]


def _scores(adapter, ids, attn, completion, prompt_len, chunk, logit_chunk):
    """(M, P+L) canvases -> (M, L) log p(o_k), logit of o_k and largest logit, differentiable."""
    out = []
    chunk = chunk or ids.shape[0]
    for s in range(0, ids.shape[0], chunk):
        logits = adapter.logits(ids[s : s + chunk], attn[s : s + chunk])[:, prompt_len:]  # (m, L, V)
        tgt = completion[s : s + chunk]
        out.append(
            torch.stack(
                [
                    target_logprobs(logits, tgt, logit_chunk),
                    logits.gather(-1, tgt[..., None]).squeeze(-1).float(),
                    logits.amax(-1).float(),
                ],
                dim=-1,
            )
        )
    return torch.cat(out)  # (M, L, 3)


def map_logprobs(
    adapter,
    prompt_ids,
    prompt_mask,
    completion,
    *,
    commit_step,
    blocks: int = 4,
    seq_ids=None,
    inner: int = 0,
    seed: int = 0,
    p_mask_prompt: float = 0.0,
    chunk: int | None = None,
    logit_chunk: int = LOGIT_CHUNK,
    fewest=None,
    par=None,
    **_,
) -> torch.Tensor:
    """(N, L, 2): the step-merged token log-likelihood l_k and the position log-likelihood pi_k; K and the
    passes agreed over the step and every process as in `sml_logprobs` (`fewest`, `par`)."""
    n, L = completion.shape
    device = adapter.device
    seq_ids = list(range(n)) if seq_ids is None else list(seq_ids)
    strata = assign_strata(n, L, blocks, "causal", seq_ids, inner, seed, commit_step, fewest=fewest, par=par).to(
        device
    )  # (N, L)
    prompt = mask_prompts(
        prompt_ids.to(device), prompt_mask, p_mask_prompt, adapter.mask_token_id, seq_ids, inner, seed
    )
    completion = completion.to(device)
    attn = torch.cat([prompt_mask.to(device), torch.ones_like(completion)], dim=1)
    levels = agreed_levels(strata, blocks, par)  # the same passes on every rank
    mask = torch.full_like(completion, adapter.mask_token_id)
    ids = torch.cat([torch.cat([prompt, torch.where(strata >= j, mask, completion)], dim=1) for j in levels.tolist()])
    k = len(levels)
    sc = _scores(adapter, ids, attn.repeat(k, 1), completion.repeat(k, 1), prompt.shape[1], chunk, logit_chunk).view(
        k, n, L, 3
    )
    later = strata[None] > levels[:, None, None]  # (K', N, L): the competitors of pass j's tokens
    rivals = torch.logsumexp(torch.where(later, sc[..., 2], torch.full_like(sc[..., 2], -1e4)), dim=-1)  # (K', N)
    pos = sc[..., 1] - torch.logaddexp(sc[..., 1], rivals[..., None])  # (K', N, L)
    both = torch.stack([sc[..., 0], pos], dim=-1)  # (K', N, L, 2)
    idx = torch.searchsorted(levels, strata)[None, :, :, None].expand(1, n, L, 2)
    return both.gather(0, idx).squeeze(0)  # each token from the pass of its block


def estimator(cfg):
    import functools

    return functools.partial(map_logprobs, blocks=cfg.loss.map_blocks)


def _gspo(logp, old_logp, adv, w, eps):
    s = ((w * (logp - old_logp)).sum(1) / w.sum(1).clamp(min=1e-8)).exp()  # (N,)
    return -torch.min(s * adv, s.clamp(1 - eps, 1 + eps) * adv).mean(), s


def loss_map(logp, old_logp, ref_logp, adv, valid, weights, cfg):
    w = weights * valid.float()
    tok, s = _gspo(logp[..., 0], old_logp[..., 0], adv, w, cfg.epsilon_seq)
    pos, s_pos = _gspo(logp[..., 1], old_logp[..., 1], adv, w, cfg.epsilon_seq)
    return tok + cfg.map_lambda * pos, {
        "kl": 0.0,
        **clip_stats(s, adv, valid, cfg.epsilon_seq),
        "position_ratio_mean": s_pos.mean().item(),
    }
