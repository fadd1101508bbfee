"""Start-up and the final save with no whole copy of the model on any one device: a meta-device start-up where each
rank reads only its own shards, and a streamed final save (issue 56 item 5).

    folder = empty_source(name, par, lora)                 # a save_pretrained folder to start from, or None
    adapter = load_pretrained(folder, empty=True)          # weights on the meta device: nothing held, nothing read
    stats = start_sharded(adapter.model, folder, par, device)   # FSDP2 units, then each rank's shards only
    stream_save(path, adapter, par, torch.bfloat16)        # final/: gathered tensor by tensor, written shard by shard

Start-up: the policy is built on the meta device, cast to fp32 there (no memory), sharded by FSDP2, and only then
materialised (`to_empty`): each rank allocates its own shards and reads exactly those slices of the folder's
safetensors files (memory-mapped: the rest of the file is never read). A rank's peak is its shards plus the largest
slice it reads, where the plain path held the whole policy in fp32 on every GPU and the whole checkpoint in every
host's memory. A DCP checkpoint (a resume) is read the same way, by DCP, each rank its shards (checkpoint.py).
The final save: each weight is gathered in turn (every rank takes part), rank 0 casts it to the export dtype on the
host and writes safetensors files of at most `shard_bytes`: it holds one file's worth, never the whole model in fp32.
Not on this path: LoRA (`replicate` holds its whole bf16 base anyway; the merge is a copy of it), the built-in tiny
model (built from its seed, not read), remote-code models and one process (the plain path).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ..config import ConfigError
from .parallel import Parallel

SHARD_BYTES = 5 * 2**30  # save_pretrained's usual file size


def weight_files(folder: Path) -> dict[str, Path] | None:
    """Each stored weight's safetensors file (model.safetensors, or the files an index names); None without."""
    from safetensors import safe_open

    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        return {k: folder / f for k, f in json.loads(index.read_text())["weight_map"].items()}
    single = folder / "model.safetensors"
    if not single.is_file():
        return None
    with safe_open(str(single), "pt") as handle:
        return {k: single for k in handle.keys()}


def empty_source(name: str | Path | None, par: Parallel, lora: bool = False) -> Path | None:
    """The folder a sharded start-up reads (a save_pretrained folder with safetensors and no remote code), where the
    engine runs a full fine-tune; None: the plain path (load whole, then shard)."""
    if not par.engine or lora or not name or not Path(name).is_dir() or weight_files(Path(name)) is None:
        return None
    try:
        config = json.loads((Path(name) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return None if config.get("auto_map") else Path(name)


def _alias_names(model) -> dict[int, list[str]]:
    """Every name of each parameter (tied weights have several), by the parameter's id."""
    names: dict[int, list[str]] = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(n)
    return names


def _local_region(p) -> tuple[torch.Tensor, tuple]:
    """The tensor this rank holds of `p` and the index of it in the whole weight (a DTensor's shard, else all of it)."""
    from torch.distributed.tensor import DTensor

    if not isinstance(p, DTensor):
        return p.data, tuple(slice(0, s) for s in p.shape)
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    shape, offset = compute_local_shape_and_global_offset(p.shape, p.device_mesh, p.placements)
    return p.to_local(), tuple(slice(o, o + s) for o, s in zip(offset, shape))


def read_shards(model, folder: Path) -> dict:
    """Each parameter's local shard (and every stored buffer) from `folder`'s safetensors, slice by slice; returns
    the bytes read, the largest slice and the weights' bytes in the files (what the plain path reads on every rank)."""
    from safetensors import safe_open

    files = weight_files(folder) or {}
    stats = {"read_bytes": 0, "largest_slice": 0, "file_bytes": 0}
    handles: dict[Path, object] = {}

    def read(key: str, index: tuple) -> torch.Tensor:
        if files[key] not in handles:
            handles[files[key]] = safe_open(str(files[key]), "pt")
        part = handles[files[key]].get_slice(key)[index] if index else handles[files[key]].get_tensor(key)
        stats["read_bytes"] += part.numel() * part.element_size()
        stats["largest_slice"] = max(stats["largest_slice"], part.numel() * part.element_size())
        return part

    aliases = _alias_names(model)
    for _, p in model.named_parameters():
        key = next((n for n in aliases[id(p)] if n in files), None)
        if key is None:
            raise ConfigError(
                f"{folder} has no weight {aliases[id(p)][0]} (nor a tied name of it); the sharded start-up reads a "
                "save_pretrained folder of this model's class"
            )
        local, index = _local_region(p)
        if local.numel():
            with torch.no_grad():
                local.copy_(read(key, index))
    params = {n for names in aliases.values() for n in names}
    for n, b in model.named_buffers():
        if n in files and n not in params:
            with torch.no_grad():
                b.copy_(read(n, ()))
    for key, path in files.items():
        if path not in handles:
            handles[path] = safe_open(str(path), "pt")
        meta = handles[path].get_slice(key)
        shape, size = meta.get_shape(), _DTYPE_BYTES.get(meta.get_dtype(), 4)
        stats["file_bytes"] += size * int(torch.Size(shape).numel())
    return stats


_DTYPE_BYTES = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "BF16": 2, "F16": 2, "I16": 2, "U8": 1, "I8": 1, "BOOL": 1}


def start_sharded(model, folder: Path, par: Parallel, device, trainable: bool = True) -> dict:
    """A model built on the meta device (`load_pretrained(..., empty=True)`): FSDP2's units on the meta weights
    (`par.wrap`: trainable ones cast to fp32 there), then each rank's shards allocated on `device` (the host under
    train.offload) and read from `folder`. Returns read_shards' figures plus `held_bytes`: the parameter bytes this
    rank holds, and `model_bytes`: the whole policy's at its training dtype."""
    par.wrap(model, trainable)
    buffers = {n: b.detach().clone() for n, b in model.named_buffers()}  # real already: computed, not stored
    model.to_empty(device=torch.device("cpu") if par.offload else device)
    with torch.no_grad():
        for n, b in model.named_buffers():
            b.copy_(buffers[n])
    stats = read_shards(model, folder)
    held = total = 0
    for p in model.parameters():
        local, _ = _local_region(p)
        held += local.numel() * local.element_size()
        total += p.numel() * p.element_size()
    return {**stats, "held_bytes": held, "model_bytes": total}


def _entries(model) -> list[tuple[str, torch.Tensor]]:
    """What save_pretrained stores: each parameter once under its first name (a tied copy dropped), and the
    persistent buffers."""
    aliases = _alias_names(model)
    params = [(n, p) for n, p in model.named_parameters()]
    names = {n for ns in aliases.values() for n in ns}
    keys = set(model.state_dict().keys())
    return params + [(n, b) for n, b in model.named_buffers() if n in keys and n not in names]


def _plain_class(model) -> type:
    from torch.distributed.fsdp import FSDPModule

    return next(c for c in type(model).__mro__ if not issubclass(c, FSDPModule))


def stream_save(path: Path, adapter, par: Parallel, dtype: torch.dtype | None, shard_bytes: int = SHARD_BYTES) -> dict:
    """final/ as save_pretrained writes it (config, safetensors, tokenizer, daca_adapter.json), from a sharded model:
    every rank calls it; weight by weight the shards are gathered (`full_tensor`) and rank 0 casts each to `dtype`
    (None: as held) on the host, writing a file whenever `shard_bytes` are collected. Returns rank 0's largest
    holding (`held_peak`) and the weights' bytes (`total`)."""
    from safetensors.torch import save_file
    from torch.distributed.tensor import DTensor

    from .checkpoint import write_folder

    model = adapter.model
    entries = _entries(model)

    def out_dtype(t):
        return dtype if dtype is not None and t.is_floating_point() else t.dtype

    groups, size = [[]], 0
    for name, t in entries:
        n = t.numel() * torch.empty((), dtype=out_dtype(t)).element_size()
        if groups[-1] and size + n > shard_bytes:
            groups.append([])
            size = 0
        groups[-1].append((name, t))
        size += n
    files = (
        ["model.safetensors"]
        if len(groups) == 1
        else [f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors" for i in range(len(groups))]
    )
    stats = {"held_peak": 0, "total": 0}
    failure: list[BaseException] = []

    def gather_all(tmp: Path | None) -> None:
        weight_map = {}
        for fname, group in zip(files, groups):
            part = {}
            for name, t in group:
                full = t.full_tensor() if isinstance(t, DTensor) else t  # collective: every rank, same order
                if tmp is not None:
                    part[name] = full.detach().to("cpu", out_dtype(full)).contiguous()
                    weight_map[name] = fname
                del full
            if tmp is None or failure:
                continue
            held = sum(v.numel() * v.element_size() for v in part.values())
            stats["held_peak"], stats["total"] = max(stats["held_peak"], held), stats["total"] + held
            try:
                save_file(part, str(tmp / fname), metadata={"format": "pt"})
            except Exception as exc:  # noqa: BLE001 - raised after the loop: the other ranks still gather
                failure.append(exc)
        if failure:
            raise failure[0]
        if tmp is not None and len(files) > 1:
            index = {"metadata": {"total_size": stats["total"]}, "weight_map": weight_map}
            (tmp / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")

    if par.rank != 0:
        gather_all(None)
        par.barrier()
        return stats

    def write(tmp: Path) -> None:
        try:
            tmp.mkdir(parents=True, exist_ok=True)
        except OSError:
            gather_all(None)  # the other ranks' gathers are met, then the error raised
            raise
        gather_all(tmp)
        config = model.config
        config.architectures = [_plain_class(model).__name__]
        if dtype is not None:
            config.dtype = dtype
        config.save_pretrained(tmp)
        if getattr(model, "can_generate", lambda: False)() and getattr(model, "generation_config", None):
            model.generation_config.save_pretrained(tmp)
        adapter.tokenizer.save_pretrained(tmp)
        meta = {"shift_logits": adapter.shift_logits, "source": adapter.source, "block_size": adapter.block_size}
        (tmp / "daca_adapter.json").write_text(json.dumps(meta))

    try:
        write_folder(Path(path), write)
    finally:
        par.barrier()
    return stats
