"""The field's dLLM RL methods as bases, one module each, registered in FIELD (docs/method.md,
"The field's methods as bases"): wd1, spg, espo, coupled_grpo, map, and tracerl for block models;
each module holds its advantage, loss and own likelihood estimator (on `likelihood.masked_passes`).

    base = FIELD["spg"]                   # advantage, loss, likelihood, what it admits
    lik = estimator_for(cfg) or sml_logprobs   # the base's own likelihood, or SML
    logp = lik(adapter, prompt_ids, prompt_mask, completion, inner=i, **est)  # (N, L) or (N, L, C)

A base's own estimator returns per-token channels in the last dimension, so the trainer can
slice rows without knowing them. `check` turns a variant a base does not admit (+SML where the
base defines its likelihood, a KL where the method has none) into one clear error line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...errors import ConfigError
from . import coupled, espo, spg, tracerl, wd1
from . import map as map_


@dataclass(frozen=True)
class Base:
    advantage: Callable  # (B, G) rewards, LossConfig -> (B*G,)
    loss: Callable  # LOSSES signature
    estimator: Callable | None = None  # RLConfig -> likelihood function; None: SML (sml.k, sml.partition)
    ratio_free: bool = False  # no old policy: the trainer runs no old passes
    sml: bool = True  # +SML applies (the base's likelihood is a plain per-token log-likelihood)
    kl: bool = True  # loss.beta > 0 applies
    fresh_masks: bool = False  # new random masks every inner iteration, whatever sml.* says


FIELD = {
    "wd1": Base(wd1.advantages_wd1, wd1.loss_wd1, ratio_free=True, kl=False),
    "spg": Base(
        spg.advantages_spg, spg.loss_spg, spg.estimator, ratio_free=True, sml=False, kl=False, fresh_masks=True
    ),
    "espo": Base(espo.advantages_rloo, espo.loss_espo, espo.estimator, sml=False, fresh_masks=True),
    "coupled_grpo": Base(coupled.advantages_rloo, coupled.loss_coupled, coupled.estimator, sml=False, fresh_masks=True),
    "map": Base(map_.advantages_rloo, map_.loss_map, map_.estimator, sml=False, kl=False),
    "tracerl": Base(tracerl.advantages_tracerl, tracerl.loss_tracerl, tracerl.estimator, sml=False, kl=False),
}


def estimator_for(cfg):
    """The base's own likelihood function for cfg.loss.base, or None where the base uses SML."""
    base = FIELD.get(cfg.loss.base)
    return base.estimator(cfg) if base and base.estimator else None


def ratio_free(cfg) -> bool:
    base = FIELD.get(cfg.loss.base)
    return bool(base and base.ratio_free)


def fresh_masks(cfg) -> bool:
    base = FIELD.get(cfg.loss.base)
    return bool(base and base.fresh_masks)


def check(cfg) -> None:
    """One clear line for a variant the base does not admit (it is then absent from its block, not faked)."""
    base = FIELD.get(cfg.loss.base)
    if base is None:
        return
    name = cfg.loss.base
    if cfg.sml.k > 1 and not base.sml:
        raise ConfigError(
            f"loss.base={name} defines its own likelihood, so +SML does not apply; set sml.k=1 "
            "(docs/method.md, 'The field's methods as bases')"
        )
    if cfg.loss.beta > 0 and not base.kl:
        raise ConfigError(f"loss.base={name} has no KL term; set loss.beta=0")
    if name == "spg" and cfg.loss.spg_mode not in spg.MODES:
        raise ConfigError(f"loss.spg_mode={cfg.loss.spg_mode!r}; choose from {', '.join(spg.MODES)}")
    if name == "spg" and (cfg.loss.spg_draws < 1 or cfg.loss.spg_beta <= 0):
        raise ConfigError("loss.spg_draws must be at least 1 and loss.spg_beta above 0")
    if name == "espo" and cfg.loss.espo_mc < 1:
        raise ConfigError("loss.espo_mc must be at least 1")
    if name == "map" and cfg.loss.map_blocks < 1:
        raise ConfigError("loss.map_blocks must be at least 1")
    if name == "tracerl" and not cfg.model.block_size and cfg.model.name == "tiny" and not cfg.train.init:
        # a loaded folder brings its own block size; one without blocks stops at the first pass, in one line
        raise ConfigError("loss.base=tracerl scores a block model's trace: set model.block_size (docs/method.md 12)")
    if name == "tracerl" and cfg.loss.trace_shrink < 1:
        raise ConfigError("loss.trace_shrink must be at least 1")
