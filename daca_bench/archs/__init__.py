"""Native transformers classes for the paper's masked diffusion LMs, chosen by a folder's
`model_type` without trust_remote_code.

    cls = native_class("llada")        # LLaDAModelLM; "dream"/"Dream" -> DreamModel; "llada2_moe" -> LLaDA2MoeModelLM
    SHIFTED = {"dream"}                # families whose raw logits predict the next position
"""

from __future__ import annotations

from .dream import DreamConfig, DreamModel
from .llada import LLaDAConfig, LLaDAModelLM
from .llada2 import LLaDA2MoeConfig, LLaDA2MoeModelLM

NATIVE = {"llada": LLaDAModelLM, "dream": DreamModel, "llada2_moe": LLaDA2MoeModelLM}  # lower-cased model_type -> class
SHIFTED = {"dream"}


def native_class(model_type: str):
    """The native class for a config's model_type (case-insensitive), or None."""
    return NATIVE.get(str(model_type or "").lower())


__all__ = [
    "DreamConfig",
    "DreamModel",
    "LLaDA2MoeConfig",
    "LLaDA2MoeModelLM",
    "LLaDAConfig",
    "LLaDAModelLM",
    "NATIVE",
    "SHIFTED",
    "native_class",
]
