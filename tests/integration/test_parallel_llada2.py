"""The native LLaDA2.0 (MoE) class under the FSDP2 engine on 2 gloo processes: full fine-tuning under
`shard` (each decoder layer and each layer's expert set a unit) and LoRA under `replicate` give one
process's gradients of dFactory's two-stream loss, although the ranks' tokens go to different experts
(every rank calls every expert, so the all-gathers stay in step: a hang fails the test)."""

import pytest
import torch
from ranks import run_ranks

from repo_paths import FIXTURES

pytestmark = pytest.mark.slow
LORA_TARGETS = ["query_key_value", "dense", "gate_proj", "up_proj", "down_proj"]


def _model(lora: bool):
    from daca_bench.archs import LLaDA2MoeConfig, LLaDA2MoeModelLM

    gold = torch.load(FIXTURES / "golden" / "llada2.pt")
    model = LLaDA2MoeModelLM(LLaDA2MoeConfig(**gold["config"]))
    model.load_state_dict(gold["state"])
    model.train()
    if lora:
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(0)
        model = get_peft_model(
            model, LoraConfig(r=4, lora_alpha=8, target_modules=LORA_TARGETS, init_lora_weights=False)
        )
    return model, gold


def _loss(model, gold, rows) -> torch.Tensor:
    """The two-stream (dFactory) same-token loss of `rows`, summed over their masked tokens."""
    n = gold["ids"].shape[1]
    ids = torch.cat([gold["noisy"], gold["ids"]], dim=1)[rows]
    mask = gold["train_mask"][None, None].expand(len(rows), -1, -1, -1)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=gold["train_positions"][rows]).logits[:, :n]
    labels = gold["labels"][rows]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="sum")


def _worker(rank: int, world: int, store_path: str, queue) -> None:
    import datetime

    import torch.distributed as dist

    from daca_bench.engine.parallel import Parallel

    try:
        dist.init_process_group(
            "gloo",
            store=dist.FileStore(store_path, world),
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=60),
        )
        out = {}
        for mode, lora in (("shard", False), ("replicate", True)):
            single, gold = _model(lora)
            (_loss(single, gold, [0, 1]) / world).backward()
            want = {n: p.grad for n, p in single.named_parameters() if p.requires_grad}
            model, _ = _model(lora)
            par = Parallel(mode, rank, world)
            par.wrap(model)
            with par.micro(model, last=True):
                _loss(model, gold, [rank]).backward()
            got = {n: p.grad.full_tensor() for n, p in model.named_parameters() if p.requires_grad}
            out[mode] = max((got[n] - want[n]).abs().max().item() for n in want)
            out[f"{mode}-lora"] = all("lora_" in n for n in want)
        queue.put((rank, out, None))
        dist.destroy_process_group()
    except Exception as exc:  # reported, not hung
        queue.put((rank, None, repr(exc)))


def test_shard_and_lora_replicate_on_two_processes_equal_one():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        got = run_ranks(_worker, 2, f"{tmp}/store")
    assert [g[2] for g in got] == [None, None], got
    for _, out, _ in got:
        assert out["shard"] <= 1e-5 and out["replicate"] <= 1e-5, out
        assert out["replicate-lora"] and not out["shard-lora"]  # LoRA: the adapters only are trained
