"""Golden numbers from the ORIGINAL LLaDA, Dream and SDAR code, for tests/unit/base/test_archs*.py.

    python scripts/golden_models.py --llada DIR --dream DIR            # writes tests/fixtures/golden/*.pt
    python scripts/golden_models.py --llada DIR --dream DIR --check    # recomputes, compares, writes nothing
    python scripts/golden_models.py --sdar DIR                         # SDAR: scripts/golden_sdar.py says what

DIR holds the published modeling files, fetched into a temporary folder and never committed:
LLaDA: configuration_llada.py, modeling_llada.py (GSAI-ML/LLaDA-8B-Instruct); Dream:
configuration_dream.py, modeling_dream.py, generation_utils.py (Dream-org/Dream-v0-Instruct-7B).
They are imported from a temporary package and patched in memory (daca_bench.archs.remote) so
they run on the installed transformers. Each family gets a tiny config with the published
fields, random weights from a fixed seed, and fp32 outputs for: an unpadded batch; a left-padded
batch (LLaDA: given its mask, which the original ignores, as d1 runs it; Dream: its
(B, 1, L, L) bool mask and positions from the first real token); one gradient of a fixed
weighted sum of the unpadded logits. The .pt files hold the config, weights, inputs and outputs.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from daca_bench.archs.remote import patch_module  # noqa: E402

OUT = ROOT / "tests/fixtures/golden"
FILES = {
    "llada": ("configuration_llada.py", "modeling_llada.py"),
    "dream": ("configuration_dream.py", "modeling_dream.py", "generation_utils.py"),
}
# tiny configs: the published fields, small sizes; pad/eos/mask ids inside the small vocabulary
CONFIGS = {
    "llada": dict(
        d_model=32,
        n_heads=4,
        n_kv_heads=4,
        n_layers=2,
        mlp_hidden_size=48,
        mlp_ratio=4,
        vocab_size=96,
        embedding_size=96,
        max_sequence_length=64,
        rope_theta=500000.0,
        rms_norm_eps=1e-5,
        rope=True,
        rope_full_precision=True,
        block_type="llama",
        layer_norm_type="rms",
        activation_type="silu",
        include_bias=False,
        include_qkv_bias=False,
        weight_tying=False,
        alibi=False,
        flash_attention=False,
        attention_layer_norm=False,
        scale_logits=False,
        input_emb_norm=False,
        block_group_size=1,
        init_device="cpu",
        mask_token_id=95,
        eos_token_id=94,
        pad_token_id=94,
    ),
    "dream": dict(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        hidden_act="silu",
        max_position_embeddings=64,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        rope_scaling=None,
        use_sliding_window=False,
        tie_word_embeddings=False,
        mask_token_id=95,
        pad_token_id=94,
        bos_token_id=94,
        eos_token_id=94,
    ),
}
GRADS = {
    "llada": (
        "model.transformer.wte.weight",
        "model.transformer.blocks.0.q_proj.weight",
        "model.transformer.ln_f.weight",
    ),
    "dream": ("model.embed_tokens.weight", "model.layers.0.self_attn.k_proj.bias", "model.norm.weight"),
}
PADS = 3  # left pads before row 1 of the padded batch; row 0 holds 3 more real tokens instead


def load_original(family: str, folder: Path, tmp: Path):
    """(config class, model class) of the original code, imported from a temporary package."""
    pkg = tmp / f"original_{family}"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name in FILES[family]:
        if not (folder / name).exists():
            raise SystemExit(f"golden_models: {folder} has no {name}")
        shutil.copy(folder / name, pkg / name)
    sys.path.insert(0, str(tmp))
    modeling = importlib.import_module(f"{pkg.name}.{FILES[family][1][:-3]}")
    config = importlib.import_module(f"{pkg.name}.{FILES[family][0][:-3]}")
    patch_module(modeling)
    return (
        (config.LLaDAConfig, modeling.LLaDAModelLM) if family == "llada" else (config.DreamConfig, modeling.DreamModel)
    )


def random_state(model: torch.nn.Module, seed: int) -> dict:
    """Weights from a fixed seed: norms near 1, biases small, matrices N(0, 0.1) (the published inits are all
    close to zero, which would make every logit alike)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, p in model.state_dict().items():
        noise = torch.randn(p.shape, generator=gen)
        out[name] = (
            1 + 0.1 * noise if name.endswith("norm.weight") else (0.02 if name.endswith("bias") else 0.1) * noise
        )
    return out


def inputs(vocab: int, pad: int, seed: int) -> dict:
    """ids (2, 8) unpadded; padded (2, 11): row 0 three more real tokens then ids[0], row 1 three pads then ids[1]."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab - 2, (2, 8), generator=gen)  # (B, T), no pad or mask ids
    prefix = torch.randint(0, vocab - 2, (PADS,), generator=gen)
    padded = torch.stack([torch.cat([prefix, ids[0]]), torch.cat([torch.full((PADS,), pad), ids[1]])])  # (B, T + 3)
    mask = torch.ones_like(padded)
    mask[1, :PADS] = 0
    return {"ids": ids, "padded": padded, "mask": mask, "weights": torch.randn(ids.shape + (vocab,), generator=gen)}


def run(family: str, folder: Path, tmp: Path) -> dict:
    config_cls, model_cls = load_original(family, folder, tmp)
    fields = CONFIGS[family]
    config = config_cls(**fields)
    model = model_cls(config, init_params=False) if family == "llada" else model_cls(config)
    state = random_state(model, seed=1 if family == "llada" else 2)
    model.load_state_dict(state, strict=True)
    if family == "dream":
        model.reset_rope_parameters()
    model.eval()
    x = inputs(fields["vocab_size"], fields["pad_token_id"], seed=3)
    out = {
        "family": family,
        "config": fields,
        "state": state,
        **{k: x[k] for k in ("ids", "padded", "mask", "weights")},
    }
    with torch.no_grad():
        out["logits"] = model(input_ids=x["ids"]).logits.float()  # (B, T, V)
        if family == "llada":
            out["padded_logits"] = model(input_ids=x["padded"], attention_mask=x["mask"]).logits.float()
        else:
            keep = x["mask"].bool()
            square = keep[:, None, None, :].expand(-1, 1, keep.shape[1], -1)  # (B, 1, L, L) bool, the form Dream takes
            pos = (x["mask"].cumsum(-1) - 1).clamp(min=0)
            out["padded_logits"] = model(input_ids=x["padded"], attention_mask=square, position_ids=pos).logits.float()
    model.zero_grad()
    (model(input_ids=x["ids"]).logits * x["weights"]).sum().backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    out["grads"] = {n: grads[n] for n in GRADS[family]}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llada", type=Path, help="folder with LLaDA's configuration_llada.py and modeling_llada.py")
    ap.add_argument(
        "--dream", type=Path, help="folder with Dream's configuration_dream.py, modeling_dream.py, generation_utils.py"
    )
    ap.add_argument(
        "--sdar",
        type=Path,
        help="folder with SDAR's configuration_sdar.py, modeling_sdar.py, generate.py (golden_sdar.py)",
    )
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="compare with the committed fixtures instead of writing")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for family in ("llada", "dream"):
            folder = getattr(args, family)
            if folder is None:
                continue
            got = run(family, folder, Path(tmp))
            path = args.out / f"{family}.pt"
            if args.check:
                ref = torch.load(path)
                for key in ("logits", "padded_logits"):
                    diff = (got[key] - ref[key]).abs().max().item()
                    print(f"{family} {key}: max |diff| {diff:.2e}")
                    bad += diff > 1e-6
            else:
                args.out.mkdir(parents=True, exist_ok=True)
                torch.save(got, path)
                print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")
        if args.sdar is not None:
            bad += sdar(args.sdar, Path(tmp), args.out / "sdar.pt", args.check)
    return int(bad > 0)


def sdar(folder: Path, tmp: Path, path: Path, check: bool) -> int:
    """SDAR's golden file (scripts/golden_sdar.py); with check, the number of outputs that moved."""
    import golden_sdar

    got = golden_sdar.run(folder, tmp)
    if not check:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(got, path)
        print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")
        return 0
    ref, bad = torch.load(path), 0
    for key in ("logits", "padded_logits", "loss", "rows"):
        diff = (got[key] - ref[key]).abs().max().item()
        print(f"sdar {key}: max |diff| {diff:.2e}")
        bad += diff > 1e-6
    for run, old in zip(got["decodes"], ref["decodes"]):
        same = torch.equal(run["tokens"], old["tokens"])
        print(f"sdar decode {run['strategy']}: {'same tokens' if same else 'TOKENS DIFFER'}")
        bad += not same
    return bad


if __name__ == "__main__":
    sys.exit(main())
