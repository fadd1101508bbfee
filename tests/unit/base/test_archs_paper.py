"""The paper path on CPU: tiny folders in the published LLaDA and Dream formats (config fields,
model_type, auto_map, key names, vocabulary sizes, real special-token ids) load through the native
classes without remote code and go through `sample`, `eval` and one `train` step of the paper
configs with CPU-sized overrides; save/load; the adapter's Dream shift and mask forms."""

import json

import pytest
import torch

from daca_bench.models import load_pretrained

from repo_paths import FIXTURES as FIX

IDS = {"llada": {"mask": 126336, "eos": 126081}, "dream": {"mask": 151666, "eos": 151643}}
CPU = [
    "train.steps=1",
    "train.prompts_per_step=2",
    "train.num_generations=2",
    "train.n_eval=2",
    "train.mu=1",
    "train.threads=1",
    "train.lora_r=4",
    "train.lora_alpha=8",
    "train.max_prompt_length=48",
    "train.save_every=1",
    "train.eval_every=1",
    "train.require_gpu=false",
    "model.dtype=float32",
    "rollout.gen_length=8",
    "rollout.block_length=4",
    "rollout.steps=4",
    "rollout.batch_size=4",
    "eval.gen_length=8",
    "eval.block_length=4",
    "eval.steps=4",
    "eval.batch_size=2",
    "sml.chunk=2",
    "sml.k=2",
    "dps.enabled=true",
]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from daca_bench.testing.paper import write_paper_folder

    torch.set_num_threads(2)
    root = tmp_path_factory.mktemp("paper")
    return {f: write_paper_folder(f, root / f) for f in ("llada", "dream")}


@pytest.fixture
def local_gsm8k(monkeypatch):
    """openai/gsm8k read from the committed five-row fixture (no hub in the suite)."""
    import sys

    from daca_bench.registry import task_spec

    math_reasoning = sys.modules[task_spec("gsm8k").build.__module__]
    real = math_reasoning.load_rows

    def rows(hub_id, **kw):
        if hub_id == "openai/gsm8k":
            kw["path"] = FIX / "gsm8k.jsonl"
        return real(hub_id, **kw)

    monkeypatch.setattr(math_reasoning, "load_rows", rows)


@pytest.mark.parametrize("family", ["llada", "dream"])
def test_published_format_loads_natively_with_the_real_ids(folders, family):
    from daca_bench.archs import NATIVE

    cfg = json.loads((folders[family] / "config.json").read_text())
    assert cfg["auto_map"] and not list(folders[family].glob("*.py"))  # the hub layout, without its code
    adapter = load_pretrained(str(folders[family]))
    assert type(adapter.model) is NATIVE[family]
    assert (adapter.mask_token_id, adapter.eos_token_id, adapter.pad_token_id) == (IDS[family]["mask"],) + (
        IDS[family]["eos"],
    ) * 2
    assert adapter.shift_logits is (family == "dream") and not adapter.square_mask


def test_dream_adapter_logits_are_the_raw_logits_shifted_one_position(folders):
    adapter = load_pretrained(str(folders["dream"]))
    ids = torch.tensor([adapter.encode(["12+5="])[0] + [adapter.mask_token_id] * 3])
    with torch.no_grad():
        raw = adapter.model(input_ids=ids).logits
        got = adapter.logits(ids, torch.ones_like(ids))
    assert torch.equal(got[:, 1:], raw[:, :-1]) and torch.equal(got[:, 0], raw[:, 0])


@pytest.mark.parametrize("family", ["llada", "dream"])
def test_left_padding_is_invisible_through_the_adapter(folders, family):
    adapter = load_pretrained(str(folders[family]))
    ids = torch.tensor([adapter.encode(["3+4="])[0] + [adapter.mask_token_id] * 4])
    padded = torch.cat([torch.full((1, 3), adapter.pad_token_id), ids], 1)
    mask = (torch.arange(padded.shape[1]) >= 3).long()[None]
    with torch.no_grad():
        alone, inside = adapter.logits(ids, torch.ones_like(ids)), adapter.logits(padded, mask)
    rows = slice(4 if family == "dream" else 3, None)  # Dream's first real row is shifted in from a pad
    assert torch.allclose(inside[:, rows], alone[:, rows.start - 3 :], atol=1e-5)


@pytest.mark.parametrize("family", ["llada", "dream"])
def test_save_load_round_trip_gives_identical_logits(folders, family, tmp_path):
    adapter = load_pretrained(str(folders[family]))
    adapter.save(tmp_path / "m")
    again = load_pretrained(str(tmp_path / "m"))
    ids = torch.tensor([adapter.encode(["7*6="])[0] + [adapter.mask_token_id] * 2])
    with torch.no_grad():
        assert torch.equal(adapter.logits(ids, torch.ones_like(ids)), again.logits(ids, torch.ones_like(ids)))
    assert (again.shift_logits, again.mask_token_id) == (adapter.shift_logits, adapter.mask_token_id)


def test_decoding_ids_past_the_tokenizer_does_not_crash(folders):
    adapter = load_pretrained(str(folders["dream"]))
    beyond = adapter.model.config.vocab_size - 1  # Dream's output layer is larger than its vocabulary
    assert beyond >= len(adapter.tokenizer)
    assert adapter.decode_token(beyond) == "" and adapter.decode_token(adapter.encode(["7"])[0][0]) == "7"
    assert adapter.decode(adapter.encode(["42"])[0] + [beyond]) == "42"


@pytest.mark.parametrize("family", ["llada", "dream"])
def test_sample_and_eval_commands(folders, family, tmp_path, capsys, local_gsm8k):
    from daca_bench.cli import main

    model = str(folders[family])
    assert (
        main(
            [
                "sample",
                "--model",
                model,
                "--task",
                "arithmetic",
                "--n",
                "2",
                "--output",
                str(tmp_path / "s.jsonl"),
                "sampler.gen_length=8",
                "sampler.block_length=4",
                "sampler.steps=4",
                "sampler.batch_size=2",
            ]
        )
        == 0
    )
    rows = [json.loads(x) for x in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(len(r["commit_step"]) == 8 for r in rows)
    assert (
        main(
            [
                "eval",
                "--model",
                model,
                "--task",
                "gsm8k",
                "--protocol",
                "d1",
                "--n",
                "2",
                "--gen-length",
                "8",
                "--block-length",
                "4",
                "--steps",
                "4",
                "--batch-size",
                "2",
                "--output-dir",
                str(tmp_path / "e"),
                "--no-progress",
            ]
        )
        == 0
    )
    assert "chat template on" in capsys.readouterr().out
    assert len((tmp_path / "e" / "samples.jsonl").read_text().splitlines()) == 2


@pytest.mark.parametrize("family", ["llada", "dream"])
def test_one_train_step_of_the_paper_config(folders, family, tmp_path, local_gsm8k):
    """LoRA, gradient checkpointing, chat template, KL reference, checkpoint, final eval, DPS examples."""
    from daca_bench.cli import main

    rc = main(
        [
            "train",
            "--config",
            f"configs/paper/{family}_gsm8k.yaml",
            "--output-dir",
            str(tmp_path / "run"),
            "--no-progress",
            f"model.name={folders[family]}",
            *CPU,
        ]
    )
    assert rc == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 1
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["train"]["gradient_checkpointing"] and config["train"]["lora"] and config["loss"]["beta"] > 0
    assert not config["model"]["trust_remote_code"]
    assert list((tmp_path / "run").glob("checkpoint-*/dcp/.metadata"))  # a DCP checkpoint: any GPU count resumes it


def test_gpu_models_script_runs_tiny_on_cpu(tmp_path):
    import importlib

    gpu_models = importlib.import_module("benchmarks.gpu.gpu_models")
    rows = gpu_models.main(["--tiny", "--json", str(tmp_path / "rows.json")])
    assert [r["model"] for r in rows] == ["llada", "dream"]
    assert all(r["finite"] and r["lora_grad_finite"] and r["rollout_s"] > 0 for r in rows)
    assert json.loads((tmp_path / "rows.json").read_text()) == rows


@pytest.mark.parametrize(
    "argv,key",
    [
        (
            ["eval", "--model", "tiny", "--task", "arithmetic", "--n", "2", "--gen-length", "64", "256"],
            "--gen-length=256",
        ),
        (
            [
                "sample",
                "--model",
                "tiny",
                "--task",
                "arithmetic",
                "--n",
                "2",
                "sampler.gen_length=256",
                "sampler.block_length=256",
                "sampler.steps=256",
            ],
            "sampler.gen_length=256",
        ),
        (
            [
                "train",
                "train.steps=1",
                "rollout.gen_length=256",
                "rollout.block_length=256",
                "rollout.steps=256",
                "eval.gen_length=256",
                "eval.block_length=256",
                "eval.steps=256",
            ],
            "rollout.gen_length=256",
        ),
    ],
)
def test_a_canvas_beyond_the_models_positions_is_one_line_exit_2(argv, key, tmp_path, capsys):
    from daca_bench.cli import main

    out = ["--output-dir", str(tmp_path / "o")] if argv[0] in ("eval", "train") else []
    assert main(argv[:1] + out + argv[1:]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and key in err[0] and "128 positions" in err[0], err
    assert not (tmp_path / "o" / "metrics.jsonl").exists()
