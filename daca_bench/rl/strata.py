"""Which completion positions each likelihood pass hides: SML's strata and d1's prompt masks (docs/method.md, 5-6).

`assign_strata` splits each sequence into K strata by a partition registered in STRATA (a block model's
inside each block: `block_strata`); a `causal` K is clamped to the fewest denoising steps (`fewest_steps`),
and `agreed_levels` gives every process the same passes. Masks come from generators keyed by (seed, sequence
id, inner iteration) (`keyed_generator`), so the current, old and reference policies see the same masks.

    strata = assign_strata(2, 8, 4, "random", seq_ids=[0, 1], inner=0)   # (2, 8) in 0..3
"""

from __future__ import annotations

import hashlib
import warnings

import torch

STRATA = {}


def keyed_generator(*key) -> torch.Generator:
    digest = hashlib.sha256(repr(key).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))


def _strata(fn):
    STRATA[fn.__name__.removeprefix("strata_")] = fn
    return fn


@_strata
def strata_random(L: int, K: int, gen: torch.Generator, commit_step=None) -> torch.Tensor:
    perm = torch.randperm(L, generator=gen)
    out = torch.empty(L, dtype=torch.long)
    out[perm] = torch.arange(L) % K
    return out


@_strata
def strata_strided(L: int, K: int, gen=None, commit_step=None) -> torch.Tensor:
    return torch.arange(L) % K


@_strata
def strata_commit_order(L: int, K: int, gen=None, commit_step=None) -> torch.Tensor:
    """Contiguous runs of the decoding order: the first-committed L/K tokens form stratum 0, and so on."""
    if commit_step is None:
        raise ValueError("sml.partition=commit_order needs the rollouts' trajectory record")
    rank = torch.empty(L, dtype=torch.long)
    rank[torch.argsort(commit_step, stable=True)] = torch.arange(L)
    return rank * K // L


@_strata
def strata_causal(L: int, K: int, gen=None, commit_step=None) -> torch.Tensor:
    """The sampler's steps merged into K consecutive groups: stratum = (tau_k - 1) * K // T, with T
    this sequence's number of steps; K = T gives one stratum per step. Scored cumulatively (CAUSAL).
    Balances decoding steps (each stratum holds T/K of them, +-1), not tokens: a stratum has as many
    tokens as its steps committed. K above T would leave strata empty: assign_strata clamps K to T."""
    if commit_step is None:
        raise ValueError("sml.partition=causal needs the rollouts' trajectory record")
    T = int(commit_step.max().clamp(min=1))
    return ((commit_step - 1).clamp(min=0) * K) // T


CAUSAL = {"causal"}  # partitions whose pass j masks every stratum >= j, not only stratum j


def fewest_steps(commit_step: torch.Tensor, block: int = 0, par=None) -> torch.Tensor:
    """(blocks,) the fewest denoising steps any row took, per block of `block` positions (one entry without
    blocks; a block's steps counted from its first), the minimum over every process when `par` (an
    engine.parallel.Parallel) is given: K is then clamped alike on every rank and every micro-batch."""
    n, L = commit_step.shape
    width = block or L
    if L % width:
        raise ValueError(f"the completion length {L} is not a multiple of model.block_size={block}")
    parts = commit_step.reshape(n, L // width, width)
    steps = parts.amax(-1) - parts.amin(-1) + 1 if block else parts.amax(-1)
    fewest = steps.clamp(min=1).amin(0).long().cpu()  # (blocks,)
    return fewest if par is None else par.reduce(fewest, "min")


def agreed_levels(strata: torch.Tensor, k: int, par=None) -> torch.Tensor:
    """The strata (< k) that hold a token in some row of some process, sorted: one pass each. Every process runs
    the same passes (a stratum empty in its own rows gets an empty pass), so under FSDP2 every rank makes the
    same all-gathers and no rank waits forever; without `par`, the strata of these rows only."""
    present = torch.bincount(strata.flatten().cpu(), minlength=k)[:k] > 0
    if par is not None:
        present = par.reduce(present.long(), "max") > 0
    return present.nonzero().flatten().to(strata.device)


def assign_strata(
    n: int,
    L: int,
    K: int,
    partition: str,
    seq_ids,
    inner: int,
    seed: int = 0,
    commit_step: torch.Tensor | None = None,
    block: int = 0,
    fewest=None,
    par=None,
) -> torch.Tensor:
    """(N, L) stratum index in [0, K) per completion position. `random`, `strided` and `commit_order`
    balance tokens (every stratum holds L/K of each sequence's positions, +-1); `causal` balances
    decoding steps (see strata_causal) and clamps K to the fewest steps of any sequence, with a warning:
    `fewest` (from `fewest_steps`, over the whole step's rows on every process) when given, else these rows'
    (over every process with `par`). block > 0 (a block model): the strata are drawn inside each block of
    that many positions (`block_strata`)."""
    if block:
        return block_strata(n, L, K, partition, seq_ids, inner, seed, commit_step, block, fewest, par)
    if not 1 <= K <= L:
        raise ValueError(f"sml.k={K} must be between 1 and the completion length {L}")
    if partition not in STRATA:
        raise ValueError(f"unknown sml.partition {partition!r}; choose from {', '.join(STRATA)}")
    if partition in CAUSAL and commit_step is not None:
        steps = int((fewest_steps(commit_step, 0, par) if fewest is None else fewest)[0])  # the fewest of any row
        if K > steps:
            warnings.warn(
                f"sml.partition=causal: sml.k={K} is above the {steps} denoising steps of the "
                f"rollouts; using k={steps} (more strata than steps would leave some empty)",
                stacklevel=3,
            )
            K = steps
    rows = [
        STRATA[partition](
            L, K, keyed_generator(seed, "strata", sid, inner), None if commit_step is None else commit_step[i]
        )
        for i, sid in enumerate(seq_ids)
    ]
    return torch.stack(rows)


def block_strata(
    n: int,
    L: int,
    K: int,
    partition: str,
    seq_ids,
    inner: int,
    seed: int,
    commit_step,
    block: int,
    fewest=None,
    par=None,
):
    """A block model's strata: each block's B positions split into min(K, B) strata as `assign_strata` splits
    a completion (keyed by the block too; `causal` and `commit_order` from the block's own commit steps,
    counted from its first; `causal` clamps each block's K to `fewest`, from `fewest_steps(..., block, par)`).
    Pass j then masks stratum j of every block at once: each block is scored with
    the clean blocks before it and (K-1)/K of itself (K >= B: its pseudo-likelihood)."""
    if L % block:
        raise ValueError(f"the completion length {L} is not a multiple of model.block_size={block}")
    if partition in CAUSAL and commit_step is not None and fewest is None:
        fewest = fewest_steps(commit_step, block, par)  # one reduction for every block
    out = []
    for j in range(0, L, block):
        steps = None if commit_step is None else commit_step[:, j : j + block]
        steps = None if steps is None else steps - steps.amin(1, keepdim=True) + 1  # the block's own steps from 1
        out.append(
            assign_strata(
                n,
                block,
                min(K, block),
                partition,
                [(sid, "block", j) for sid in seq_ids],
                inner,
                seed,
                steps,
                fewest=None if fewest is None else fewest[j // block : j // block + 1],
            )
        )
    return torch.cat(out, dim=1)


def mask_prompts(prompt_ids, prompt_mask, p: float, mask_id: int, seq_ids, inner: int, seed: int = 0):
    """d1's random prompt masking (p_mask_prompt), keyed like the strata; padding is never masked."""
    if p <= 0:
        return prompt_ids
    draws = torch.stack(
        [torch.rand(prompt_ids.shape[1], generator=keyed_generator(seed, "prompt", sid, inner)) for sid in seq_ids]
    )
    hide = (draws < p) & prompt_mask.bool().cpu()
    return torch.where(hide.to(prompt_ids.device), torch.full_like(prompt_ids, mask_id), prompt_ids)
