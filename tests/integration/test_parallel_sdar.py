"""A released block family under the FSDP2 engine (issue 57): a tiny SDAR folder in the published layout
(daca_bench.testing.paper, the native class, block size 4 from its config) trains one step, LoRA and
full fine-tuning, on 2 gloo processes under train.parallel=shard equal to 1 process (weights, every
logged metric, the evaluation rows), with the block sampler's exact KV cache and the two-stream
likelihood."""

import json

import pytest
from test_parallel import _run, assert_same_run

from daca_bench.testing.paper import write_paper_folder

pytestmark = pytest.mark.slow

SDAR = ["train.steps=1", "train.save_every=1", "rollout.cache=block", "eval.gen_length=8", "train.require_gpu=false"]
LORA = ["train.lora=true", "train.lora_r=4", "train.lora_alpha=8", "train.lora_dropout=0"]  # dropout draws per rank


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_paper_folder("sdar", tmp_path_factory.mktemp("sdar") / "tiny", compact=True)


@pytest.mark.parametrize("lora", [True, False], ids=["lora", "full"])
def test_two_processes_equal_one_on_sdar(tmp_path, folder, lora):
    extra = [f"model.name={folder}", *SDAR, *(LORA if lora else [])]
    one, two = tmp_path / "one", tmp_path / "two"
    _run(1, one, *extra)
    _run(2, two, *extra, "train.parallel=shard")
    config = json.loads((two / "config.json").read_text())
    assert config["parallel_used"] == "shard" and config["rollout"]["cache"] == "block"
    assert json.loads((one / "final" / "daca_adapter.json").read_text())["block_size"] == 4
    assert_same_run(one, two)
