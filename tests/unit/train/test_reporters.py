import json
import struct
import time

import pytest
from test_trainer import _cfg

from daca_bench.config import ConfigError
from daca_bench.train.reporters import reporter_names
from daca_bench.train.trainer import train


def test_report_to_takes_none_one_name_or_a_list():
    assert reporter_names("none") == []
    assert reporter_names("wandb") == ["wandb"]
    assert reporter_names("tensorboard, wandb,tensorboard") == ["tensorboard", "wandb"]
    with pytest.raises(ConfigError, match="did you mean tensorboard"):
        reporter_names("tensorbord,wandb")


def _wandb_records(path):
    """The protobuf Records of a .wandb file: a 7-byte header, then LevelDB-log chunks
    (crc32, length, type) in 32 KiB blocks; types 1 full, 2 first, 3 middle, 4 last."""
    from wandb.proto.wandb_internal_pb2 import Record

    data, pos, block, records, parts = path.read_bytes(), 7, 32768, [], b""
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # the tail of a block too short for a chunk header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if pos + 7 + length > len(data):  # a chunk still being written
            break
        parts += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            rec = Record()
            rec.ParseFromString(parts)
            records.append(rec)
            parts = b""
    return records


def _finished_run(path, timeout=60.0):
    """The records once the run's exit record is on disk: wandb's service process may still be
    writing the file when `finish()` returns."""
    deadline = time.monotonic() + timeout
    while True:
        records = _wandb_records(path)
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def test_a_run_reports_to_tensorboard_and_wandb_offline(tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    train(_cfg(train={"steps": 2, "report_to": "tensorboard,wandb"}), tmp_path, progress=False)
    logged = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]

    (run_file,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    records = _finished_run(run_file)
    history = {}
    for r in records:
        if r.WhichOneof("record_type") == "history":
            row = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
            history[row["_step"]] = row
    assert sorted(history) == [1, 2]
    for row in logged:
        assert history[row["step"]]["loss"] == pytest.approx(row["loss"])
        assert history[row["step"]]["reward"] == pytest.approx(row["reward"])
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    config = {u.key: json.loads(u.value_json) for u in run.config.update}
    assert config["train"]["report_to"] == "tensorboard,wandb" and config["train"]["task"] == "even_length"

    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    losses = events.Scalars("loss")
    assert [e.step for e in losses] == [1, 2]
    assert [e.value for e in losses] == pytest.approx([row["loss"] for row in logged], rel=1e-6)
