"""Golden numbers from TraceRL's OWN code (Gen-Verse/dLLM-RL @10b4fd1), for tests/unit/rl/test_tracerl.py.

    python scripts/golden_tracerl.py --src DIR            # writes tests/fixtures/golden/tracerl.pt
    python scripts/golden_tracerl.py --src DIR --check    # recomputes, compares, writes nothing

DIR is a checkout of Gen-Verse/dLLM-RL at 10b4fd1 in a temporary folder, never committed; two files are
read: train/rl_sdar.py (the SDAR trainer, training.method "TraceRL") and reward/rl_reward.py. Their
functions are nested in main() and need accelerate, wandb and a JSON dataset, so the ones TraceRL's
objective runs through are taken out of the source as written (ast) and run in memory: TrainDataset,
simple_collate, collapse_k_unique, make_basic_block_attention, process_pad, one_round_vectorized,
collect_training_data, compute_logp_old_tok_parallel, forward_process and z_score_normalize. What they
read from main's scope is supplied: the config fields (training.block_size, shrink, eps, beta,
use_kl_estimator_k3, method="TraceRL"), start_pos = L0, L1, mask_id, pad_id, post_num = 0, a
CPU stand-in for accelerate (device, wait_for_everyone) and `model`: the tiny block model (a seeded small
config, block 4) behind a shim that turns their (B, 1, N, N) 0/1 mask into the bool mask SDPA takes.
The old policy is that model; the new one the same plus seeded noise. Each case runs every round row
in one batch (their B = the rows): the z-scored advantages, the old and new per-token log-probs read
back from their rows, the row count and forward_process's loss. The .pt holds the model config, both
weights, the inputs and the outputs.
"""

from __future__ import annotations

import argparse
import ast
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from daca_bench.config import ModelConfig  # noqa: E402
from daca_bench.models import load_model  # noqa: E402
from daca_bench.rl.sampler import pad_prompts  # noqa: E402

OUT = ROOT / "tests/fixtures/golden/tracerl.pt"
COMMIT = "10b4fd1"
TRAINER = (
    "TrainDataset",
    "simple_collate",
    "collapse_k_unique",
    "make_basic_block_attention",
    "process_pad",
    "one_round_vectorized",
    "collect_training_data",
    "compute_logp_old_tok_parallel",
    "forward_process",
)
MODEL = dict(hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64, max_positions=64, seed=0, block_size=4)
PROMPTS = ["12+5=", "3+4=", "100+23=", "7+8="]  # unequal: left padding inside the prompt's blocks
L = 12  # three blocks of 4
CASES = [dict(shrink=1, beta=0.0, eps=0.2), dict(shrink=2, beta=0.01, eps=0.2), dict(shrink=1, beta=0.01, eps=0.05)]


def extract(path: Path, names) -> str:
    """The source of each named class or function, wherever it is nested, dedented, in the order asked."""
    text = path.read_text()
    found = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names and node.name not in found:
            lines = text.splitlines()[
                (node.decorator_list[0] if node.decorator_list else node).lineno - 1 : node.end_lineno
            ]
            found[node.name] = textwrap.dedent("\n".join(lines))  # with its decorators (@torch.no_grad())
    missing = [n for n in names if n not in found]
    if missing:
        raise SystemExit(f"{path} no longer defines {missing}: is it dLLM-RL at {COMMIT}?")
    return "\n\n".join(found[n] for n in names)


class MaskShim(torch.nn.Module):
    """The tiny block model called the way rl_sdar.py calls SDAR: a (B, 1, N, N) 0/1 mask and positions."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, position_ids):
        return self.model(input_ids=input_ids, attention_mask=attention_mask.bool(), position_ids=position_ids)


def inputs():
    torch.manual_seed(0)
    adapter = load_model(ModelConfig(**MODEL))
    old = {k: v.clone() for k, v in adapter.model.state_dict().items()}
    g = torch.Generator().manual_seed(1)
    new = {k: v + 0.05 * torch.randn(v.shape, generator=g) if v.is_floating_point() else v for k, v in old.items()}
    prompt_ids, prompt_mask = pad_prompts(adapter, PROMPTS)
    pad = adapter.pad_token_id
    if not torch.equal(prompt_mask == 0, prompt_ids == pad):
        raise SystemExit("the prompts' padding must be exactly their pad tokens (TraceRL finds it by id)")
    g = torch.Generator().manual_seed(2)
    completion = torch.randint(5, 20, (len(PROMPTS), L), generator=g)
    completion[2, -3:] = pad  # padding after the end: never scored (post_num = 0)
    completion[3, -1] = pad
    commit_step = torch.randint(1, 7, (len(PROMPTS), L), generator=g)  # ties: two commits in one step
    rewards = [1.0, 0.0, 0.0, 1.0]
    return adapter, old, new, prompt_ids, prompt_mask, completion, commit_step, rewards


def run(src: Path) -> dict:
    adapter, old, new, prompt_ids, prompt_mask, completion, commit_step, rewards = inputs()
    code = extract(src / "train/rl_sdar.py", TRAINER)
    zcode = extract(src / "reward/rl_reward.py", ("z_score_normalize",))
    shim = MaskShim(adapter.model).eval()
    ids = torch.cat([prompt_ids, completion], dim=1)
    L0, L1 = prompt_ids.shape[1], L
    zs = {}
    exec(compile(zcode, "rl_reward.py", "exec"), zs)
    adv = zs["z_score_normalize"](rewards)
    out = {"advantages": torch.tensor(adv), "cases": []}
    for case in CASES:
        training = SimpleNamespace(
            block_size=MODEL["block_size"],
            shrink=case["shrink"],
            method="TraceRL",
            lower_p=0.1,
            upper_p=0.9,
            eps=case["eps"],
            beta=case["beta"],
            use_kl_estimator_k3=True,
        )
        ns = dict(
            torch=torch,
            F=torch.nn.functional,
            Dataset=torch.utils.data.Dataset,
            DataLoader=torch.utils.data.DataLoader,
            config=SimpleNamespace(training=training),
            start_pos=L0,
            L0=L0,
            L1=L1,
            mask_id=adapter.mask_token_id,
            pad_id=adapter.pad_token_id,
            post_num=0,
            accelerator=SimpleNamespace(device=torch.device("cpu"), wait_for_everyone=lambda: None),
            model=shim,
        )
        exec(compile(code, "rl_sdar.py", "exec"), ns)
        ns["basic_block_attention"] = ns["make_basic_block_attention"](L0 + 2 * L1, L0, MODEL["block_size"])
        steps = [row.tolist() for row in commit_step]
        ext, p_mask, tok_idx, labels, rew = ns["collect_training_data"](ids.clone(), steps, adv)
        rows = len(ext)

        def logps(weights):
            adapter.model.load_state_dict(weights)
            data = ns["TrainDataset"](ext, p_mask, tok_idx, labels, rew)
            loader = torch.utils.data.DataLoader(data, batch_size=rows, collate_fn=ns["simple_collate"])
            ns["compute_logp_old_tok_parallel"](ns["accelerator"], data, loader, L0, ns["pad_id"], rows)
            return data.logp_old_tok

        lp_old, lp_new = logps(old), logps(new)
        adapter.model.load_state_dict(new)
        shim.eval()  # the tiny model has no dropout; eval all the same
        with torch.no_grad():
            loss = ns["forward_process"](ext, p_mask, tok_idx, labels, rew, lp_old)
        # back from rows to tokens: each scored token appears in exactly one row
        seq = _row_sequences(ext, ids, L0)
        tok_old, tok_new = torch.full((len(ids), L), float("nan")), torch.full((len(ids), L), float("nan"))
        for r in range(rows):
            at = p_mask[r, L0:]
            tok_old[seq[r], at] = lp_old[r, L0:][at]
            tok_new[seq[r], at] = lp_new[r, L0:][at]
        out["cases"].append(
            {**case, "rows": rows, "loss": float(loss), "logp_old": tok_old.detach(), "logp_new": tok_new.detach()}
        )
    return {
        "commit": COMMIT,
        "model": MODEL,
        "old": old,
        "new": new,
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion": completion,
        "commit_step": commit_step,
        "rewards": torch.tensor(rewards),
        **out,
    }


def _row_sequences(ext: torch.Tensor, ids: torch.Tensor, L0: int) -> list[int]:
    """Which sequence each round row belongs to: its clean copy (the first L0 + L1 ids) is that sequence."""
    return [int((ids == row[: ids.shape[1]]).all(1).nonzero()[0]) for row in ext]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", required=True, type=Path, help=f"a checkout of Gen-Verse/dLLM-RL at {COMMIT}")
    ap.add_argument("--check", action="store_true", help="recompute and compare with the committed fixture")
    args = ap.parse_args()
    torch.set_num_threads(1)
    got = run(args.src)
    if args.check:
        ref = torch.load(OUT)
        for a, b in zip(got["cases"], ref["cases"]):
            assert a["rows"] == b["rows"] and abs(a["loss"] - b["loss"]) < 1e-6, (a["loss"], b["loss"])
            assert torch.allclose(a["logp_new"], b["logp_new"], atol=1e-6, equal_nan=True)
        print("tracerl goldens: unchanged")
        return
    OUT.parent.mkdir(parents=True, exist_ok=True)
    torch.save(got, OUT)
    print(f"wrote {OUT}: " + ", ".join(f"rows {c['rows']} loss {c['loss']:.6f}" for c in got["cases"]))


if __name__ == "__main__":
    main()
