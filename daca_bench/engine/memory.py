"""Activation memory at paper scale: gradient checkpointing, `sml.chunk` sized from free GPU
memory when it is 0, and the one-line out-of-memory error that names the knobs.

    enable_gradient_checkpointing(adapter.model)            # train.gradient_checkpointing=true
    chunk = sml_chunk(adapter, cfg, seq_len=P + L)          # rows per likelihood forward pass

The row estimate (`rows_that_fit`) keeps, per canvas token, the 16-bit logits row that the
chunked log-softmax holds for the backward pass, plus per layer either the layer input
(checkpointing) or ~34 h bytes of intermediates (Korthikanti et al., 2022, without the
attention-score term that fused attention avoids), and uses half the free memory. `memory_table()` is
docs/trainer.md's table of memory per GPU at LLaDA-8B, term by term (tests/test_scale_docs.py checks it), and
at SDAR-8B (`memory_table(m=SDAR_8B)`, docs/paper-presets.md).
"""

from __future__ import annotations

import torch

from ..config import ConfigError, RLConfig

KNOBS = (
    "sml.chunk (rows per likelihood pass), train.grad_accum (micro-batches), "
    "train.gradient_checkpointing=true, rollout.batch_size / eval.batch_size"
)


def enable_gradient_checkpointing(model) -> None:
    core = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft
    if not getattr(core, "supports_gradient_checkpointing", False):
        raise ConfigError(f"train.gradient_checkpointing: {type(core).__name__} does not support it; set it to false")
    if hasattr(core, "activation_checkpointing_enable"):  # transformers >= 5.x names it so
        core.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        core.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def _config_value(config, *names) -> int:
    for name in names:
        if getattr(config, name, None):
            return int(getattr(config, name))
    raise ValueError(f"model config has none of {', '.join(names)}")


def rows_that_fit(
    free_bytes: int, seq_len: int, vocab: int, hidden: int, layers: int, dtype_bytes: int, checkpointing: bool
) -> int:
    """How many (P+L)-token canvases one likelihood forward + backward can hold in half of `free_bytes`."""
    per_layer = 2 * hidden if checkpointing else 34 * hidden * dtype_bytes // 2
    per_row = seq_len * (vocab * dtype_bytes + layers * per_layer)
    return max(1, int(0.5 * free_bytes) // per_row)


def sml_chunk(adapter, cfg: RLConfig, seq_len: int) -> int | None:
    """Rows per likelihood forward pass: sml.chunk when set; on CUDA with 0, from the free memory; else all."""
    if cfg.sml.chunk or adapter.device.type != "cuda":
        return cfg.sml.chunk or None
    config = adapter.model.config
    free, _ = torch.cuda.mem_get_info(adapter.device)
    dtype_bytes = next(adapter.model.parameters()).element_size()
    return rows_that_fit(
        free,
        seq_len,
        _config_value(config, "vocab_size", "embedding_size"),
        _config_value(config, "hidden_size", "d_model"),
        _config_value(config, "num_hidden_layers", "n_layers"),
        dtype_bytes,
        cfg.train.gradient_checkpointing,
    )


def out_of_memory(step: int, exc: BaseException) -> ConfigError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ConfigError(f"out of memory in training step {step} ({first[:120]}); lower {KNOBS}")


# LLaDA-8B-Instruct (docs/trainer.md, "Memory per GPU"): its parameters, the root's (input embedding and output
# layer, 126,464 x 4,096 each), d1's LoRA at r = 128, and the measured activations of a 6-row pass (GB)
LLADA_8B = {"params": 8_015_581_184, "root": 2 * 126_464 * 4_096, "lora": 167_772_160, "activations": 15.7}
# SDAR-8B-Chat (docs/paper-presets.md, "Block diffusion: SDAR"): 36 Qwen3 blocks of 192,946,432 (q/k norms included),
# untied input embedding and output layer of 151,936 x 4,096 each, LoRA at r = 128 on all seven projections, and
# activations NOT measured: LLaDA-8B's 15.7 GB scaled by the two-stream canvas (708 / 456 tokens) and depth (36 / 32)
SDAR_8B = {
    "params": 36 * 192_946_432 + 2 * 151_936 * 4_096 + 4_096,
    "root": 2 * 151_936 * 4_096,
    "lora": 36 * 128 * (2 * 8_192 + 2 * 5_120 + 3 * 16_384),
    "activations": round(15.7 * 708 / 456 * 36 / 32, 1),
}
# LLaDA2.0-mini (docs/paper-presets.md, "LLaDA2.0"): 16,255,638,528 parameters counted on the native class at the
# published config (15.30 B of them in the routed experts, 1.43 B active per token), the root (input embedding and
# output layer, 157,184 x 2,048 each), LoRA r = 128 on query_key_value and dense of its 20 layers; activations: not
# measured, LLaDA-8B's 6-row figure stands in (LLaDA2 has the smaller hidden size, fewer layers, a 24% larger vocabulary)
LLADA2_MINI = {"params": 16_255_638_528, "root": 2 * 157_184 * 2_048, "lora": 23_592_960, "activations": 15.7}
ROWS = ("lora-none", "lora-replicate", "full-shard", "full-shard-offload")


def memory_terms(row: str, n: int, m: dict = LLADA_8B) -> dict[str, float]:
    """GB (10^9 bytes) per GPU of each term at n processes; `host` terms are host memory per process. The
    update's terms and the rollout's copy are added although they never coexist (an upper bound); `startup`,
    the GPU's peak while the policy is loaded, is a peak of its own: with the sharded start-up (engine/shards.py:
    built on the meta device, each rank reading only its slices) a rank's fp32 shards, 4 bytes per parameter / N,
    where loading whole and then sharding held the whole policy in fp32 on every GPU (4 bytes per parameter).
    Under train.offload the shards are materialised on the host (inside `host state`): none on the GPU."""
    P, R, gb = m["params"], m["lora"], 1e9
    if row.startswith("lora"):
        terms = {
            "base bf16": 2 * P / gb,
            "LoRA state": 16 * R / gb,
            "AdamW step temporary": 4 * R / gb,
            "activations": m["activations"],
        }
        return {**terms, "adapters' copy": 2 * R / gb} if row == "lora-replicate" else terms
    sharded = {"state": 16 * P / gb / n, "reference": 2 * P / gb / n, "AdamW step temporary": 4 * P / gb / n}
    gpu = {"rollout copy": 2 * P / gb, "root gather": 2 * m["root"] / gb, "activations": m["activations"]}
    if row == "full-shard-offload":
        return {**gpu, **{f"host {k}": v for k, v in sharded.items()}, "startup": 0.0}
    return {**sharded, **gpu, "startup": 4 * P / gb / n}


def memory_bound(terms: dict[str, float]) -> float:
    """The larger of the steady bound (every term but host memory and start-up, summed) and the start-up peak."""
    return max(sum(v for k, v in terms.items() if not k.startswith("host") and k != "startup"), terms.get("startup", 0))


def memory_table(gpu_gb: float = 80.0, m: dict = LLADA_8B) -> list[str]:
    """The rows of docs/trainer.md's table, N = 1, 2, 4, 8 ("fits": the bound is under `gpu_gb`, one H100), for the
    model `m` (LLaDA-8B; SDAR_8B and LLADA2_MINI give docs/paper-presets.md's)."""
    label = {
        "lora-none": "LoRA, `none` (one GPU)",
        "lora-replicate": "LoRA, `replicate`",
        "full-shard": "full, `shard`",
        "full-shard-offload": "full, `shard` + `train.offload`",
    }
    lines = []
    for row in ROWS:
        cells = []
        for n in (1, 2, 4, 8):
            if row == "lora-none" and n > 1:
                cells.append("-")
                continue
            terms = memory_terms(row, n, m)
            bound = memory_bound(terms)
            host = sum(v for k, v in terms.items() if k.startswith("host"))
            cells.append(
                f"{bound:.1f} GB, {'fits' if bound < gpu_gb else 'no'}" + (f" (host {host:.1f} GB)" if host else "")
            )
        lines.append(f"| {label[row]} | {' | '.join(cells)} |")
    return lines
