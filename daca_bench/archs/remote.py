"""Runtime shims that let the published LLaDA and Dream remote code run on transformers 5
(in memory: no file is edited). Used by `load_pretrained(..., trust_remote_code=True)` and by
scripts/golden_models.py, which runs the original code to make the golden fixtures.

    patch_module(modeling_module)   # idempotent; by the classes the module defines
    fix_loaded(model)               # after from_pretrained: Dream's RoPE buffers recomputed

What they fix (each found on transformers 5.25): LLaDA never calls post_init, its tie_weights
takes no arguments, its forward reads config.use_cache, and its own activation checkpointing is
not reachable through the standard call; Dream's `ROPE_INIT_FUNCTIONS` lacks
"default", its generation config rejects transformers 5's validate() arguments, its
_tied_weights_keys is a list, and its inv_freq buffers are left uninitialised by from_pretrained.
"""

from __future__ import annotations

import functools

import torch


def _default_rope(config, device=None, **_):
    """Plain RoPE inverse frequencies for the published Dream code's `ROPE_INIT_FUNCTIONS["default"]`."""
    dim = config.hidden_size // config.num_attention_heads
    base = getattr(config, "rope_theta", 10000.0)
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float().to(device) / dim))
    return inv, 1.0


def _patch_llada(mod) -> None:
    cls = mod.LLaDAModelLM
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, config, *args, **kwargs):
        if not hasattr(config, "use_cache") or config.__dict__.get("use_cache") is None:
            config.use_cache = False
        init(self, config, *args, **kwargs)
        if not hasattr(self, "all_tied_weights_keys"):
            self.post_init()

    cls.__init__ = __init__
    tie = cls.tie_weights
    cls.tie_weights = lambda self, *a, **k: tie(self)
    strategy = mod.ActivationCheckpointingStrategy.whole_layer

    def activation_checkpointing_enable(self, activation_checkpointing_kwargs=None, **_):
        """LLaDA's own whole-layer activation checkpointing behind the standard transformers call."""
        self.model.set_activation_checkpointing(strategy)

    cls.supports_gradient_checkpointing = True
    cls.activation_checkpointing_enable = activation_checkpointing_enable
    cls.gradient_checkpointing_enable = activation_checkpointing_enable


def _patch_dream(mod) -> None:
    funcs = dict(mod.ROPE_INIT_FUNCTIONS)
    funcs.setdefault("default", _default_rope)
    mod.ROPE_INIT_FUNCTIONS = funcs
    mod.DreamModel._tied_weights_keys = {}
    gen = getattr(mod, "DreamGenerationConfig", None)
    if gen is not None and hasattr(gen, "validate"):
        validate = gen.validate
        gen.validate = lambda self, *a, **k: validate(self)


def patch_module(mod) -> None:
    """Patch the published modeling module `mod` in place (once)."""
    if getattr(mod, "_daca_patched", False):
        return
    if hasattr(mod, "LLaDAModelLM"):
        _patch_llada(mod)
    if hasattr(mod, "DreamModel") and hasattr(mod, "ROPE_INIT_FUNCTIONS"):
        _patch_dream(mod)
    mod._daca_patched = True


def fix_loaded(model) -> None:
    """After from_pretrained: recompute Dream's RoPE buffers (transformers 5 leaves them empty)."""
    core = model.get_base_model() if hasattr(model, "get_base_model") else model
    if hasattr(core, "reset_rope_parameters"):
        with torch.no_grad():
            for m in core.modules():
                if hasattr(m, "rope_init_fn") and hasattr(m, "inv_freq"):
                    inv, m.attention_scaling = m.rope_init_fn(
                        m.config, m.inv_freq.device, **getattr(m, "rope_kwargs", {})
                    )
                    m.inv_freq = inv.to(m.inv_freq.device)
                    m.original_inv_freq = m.inv_freq
