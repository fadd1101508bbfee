"""Native transformers classes for the paper's masked diffusion LMs, chosen by a folder's
`model_type` without trust_remote_code.

    cls = native_class("llada")        # LLaDAModelLM; "dream"/"Dream" -> DreamModel; "sdar" -> SDARModelLM; "llada2_moe" -> LLaDA2MoeModelLM
    SHIFTED = {"dream"}                # families whose raw logits predict the next position
    block_size_of(config)              # a block diffusion family's block length (its config's key), else 0
"""

from __future__ import annotations

from .dream import DreamConfig, DreamModel
from .llada import LLaDAConfig, LLaDAModelLM
from .llada2 import LLaDA2MoeConfig, LLaDA2MoeModelLM
from .sdar import SDARConfig, SDARModelLM

NATIVE = {
    "llada": LLaDAModelLM,
    "dream": DreamModel,
    "sdar": SDARModelLM,
    "llada2_moe": LLaDA2MoeModelLM,
}  # lower-cased model_type -> class
SHIFTED = {"dream"}
BLOCK_KEYS = {
    "sdar": "block_size",
    "llada2_moe": "block_size",
}  # block diffusion families: lower-cased model_type -> the config key of B


def native_class(model_type: str):
    """The native class for a config's model_type (case-insensitive), or None."""
    return NATIVE.get(str(model_type or "").lower())


def block_size_of(config) -> int:
    """The block length of a block diffusion family's config (BLOCK_KEYS), 0 for full attention."""
    key = BLOCK_KEYS.get(str(getattr(config, "model_type", "") or "").lower())
    return int(getattr(config, key, 0) or 0) if key else 0


__all__ = [
    "BLOCK_KEYS",
    "DreamConfig",
    "DreamModel",
    "LLaDA2MoeConfig",
    "LLaDA2MoeModelLM",
    "LLaDAConfig",
    "LLaDAModelLM",
    "NATIVE",
    "SDARConfig",
    "SDARModelLM",
    "SHIFTED",
    "block_size_of",
    "native_class",
]
