"""Issue 56 item 5, on 2 gloo processes: a full fine-tune under the engine starts on the meta device and each rank
materialises and reads only its own shards of the folder (the policy and its reference), with the weights of the
plain path (load whole, then shard); the final save gathers weight by weight and writes file by file, never the
whole model on rank 0, the same folder save_pretrained writes. The memory is counted in bytes per rank, as the
engine's gradient test counts elements. A whole training run started this way equals one process:
tests/integration/test_parallel.py::test_a_sharded_start_from_a_folder_equals_one_process."""

import json
from pathlib import Path

import pytest
import torch
from ranks import run_ranks

pytestmark = pytest.mark.slow


def _rank(rank: int, world: int, store: str, folder: str, out: str, q) -> None:
    import datetime
    from dataclasses import replace

    import torch.distributed as dist

    from daca_bench.config import RLConfig
    from daca_bench.engine import policy as policy_module
    from daca_bench.engine import shards
    from daca_bench.engine.parallel import Parallel
    from daca_bench.engine.policy import start_policy, start_reference
    from daca_bench.models import load_model, load_pretrained

    try:
        dist.init_process_group(
            "gloo", store=dist.FileStore(store, world), rank=rank, world_size=world, timeout=datetime.timedelta(60)
        )
        par = Parallel("shard", rank, world)
        cfg = RLConfig()
        cfg = replace(cfg, train=replace(cfg.train, init=folder, parallel="shard"))
        empty = load_pretrained(folder, empty=True).model
        res = {"held_before": sum(p.numel() for p in empty.parameters() if p.device.type != "meta")}
        seen = []
        real = policy_module.start_sharded  # what the trainer's start-up calls, counted
        policy_module.start_sharded = lambda *a, **kw: seen.append(real(*a, **kw)) or seen[-1]
        try:
            policy = start_policy(cfg, None, par, torch.device("cpu"))
            reference = start_reference(cfg, par, torch.device("cpu"))
        finally:
            policy_module.start_sharded = real
        plain = load_model(replace(cfg.model, name=folder)).model
        want = dict(plain.named_parameters())
        res["policy_diff"] = max(
            (p.full_tensor() - want[n]).abs().max().item() for n, p in policy.model.named_parameters()
        )
        res["reference_diff"] = max(
            (p.full_tensor() - want[n]).abs().max().item() for n, p in reference.model.named_parameters()
        )
        res["buffers_equal"] = all(torch.equal(b, policy.model.get_buffer(n)) for n, b in plain.named_buffers())
        res["trainable"] = sorted({str(p.dtype) for p in policy.model.parameters()})
        res["frozen"] = not any(p.requires_grad for p in reference.model.parameters())
        res["loads"] = [{k: v for k, v in s.items()} for s in seen]
        # one forward and backward on every rank's rows: the gradients of the whole batch, as one process's
        x = torch.randint(4, 90, (4, 12), generator=torch.Generator().manual_seed(0))
        policy.model.train()
        policy.model(input_ids=x[rank * 2 : rank * 2 + 2]).logits.float().pow(2).mean().backward()
        plain.train()
        plain(input_ids=x).logits.float().pow(2).mean().backward()
        res["grad_diff"] = max(
            (p.grad.full_tensor() - want[n].grad).abs().max().item() for n, p in policy.model.named_parameters()
        )
        res["save"] = shards.stream_save(Path(out), policy, par, torch.float32, shard_bytes=400_000)
        q.put((rank, res, None))
        dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
        import traceback

        q.put((rank, {}, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-2000:]}"))


def test_a_sharded_start_reads_and_holds_only_each_ranks_shards_and_the_save_streams(tmp_path):
    from safetensors.torch import load_file

    from daca_bench.config import ModelConfig
    from daca_bench.models import load_model

    folder, out, plain = tmp_path / "init", tmp_path / "final", tmp_path / "plain"
    load_model(ModelConfig()).save(folder)  # the tiny model as an SFT run's final/ holds it (fp32)
    got = run_ranks(_rank, 2, str(tmp_path / "store"), str(folder), str(out))
    assert [g[2] for g in got] == [None, None], got
    for _, res, _ in got:
        assert res["held_before"] == 0  # built on the meta device: nothing held before the shards
        assert res["policy_diff"] == 0 and res["reference_diff"] == 0 and res["buffers_equal"]
        assert res["trainable"] == ["torch.float32"] and res["frozen"]
        assert res["grad_diff"] <= 1e-5
        assert len(res["loads"]) == 2  # the policy and the reference, each from its shards
        for load in res["loads"]:
            # each rank reads about half of the file and holds about half of the weights; its peak during the load
            # (its shards plus the largest slice it read) is well under the whole model, which the plain path held
            assert load["read_bytes"] == pytest.approx(load["file_bytes"] / 2, rel=0.05)
            assert load["held_bytes"] == pytest.approx(load["model_bytes"] / 2, rel=0.05)
            assert load["held_bytes"] + load["largest_slice"] < 0.65 * load["model_bytes"]
    save = got[0][1]["save"]
    assert 0 < save["held_peak"] <= 400_000 < save["total"]  # rank 0 held one file's worth, never the whole
    load_model(ModelConfig()).save(plain)
    want, files = load_file(plain / "model.safetensors"), sorted(out.glob("model-*.safetensors"))
    assert len(files) > 2 and (out / "model.safetensors.index.json").is_file()
    saved = {k: v for f in files for k, v in load_file(f).items()}
    assert saved.keys() == want.keys() and all(torch.equal(saved[k], want[k]) for k in want)
    for name in ("config.json", "tokenizer.json"):
        assert json.loads((out / name).read_text()) == json.loads((plain / name).read_text()), name
    meta = json.loads((out / "daca_adapter.json").read_text())
    assert meta == {**json.loads((plain / "daca_adapter.json").read_text()), "source": str(folder)}
