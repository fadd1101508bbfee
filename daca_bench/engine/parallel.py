"""Data parallelism on PyTorch's own engine: FSDP2 (`fully_shard`) under `torchrun`, one `Parallel`
object per process (docs/trainer.md, "Scaling out").

    par = Parallel.start(t.parallel, t.lora)   # the process group (cpu:gloo,cuda:nccl) and the mode
    model = par.wrap(model)                    # FSDP2 on a replicate / shard / hybrid mesh; as is for none
    with par.rollout(model): sample(...)       # unsharded and collective-free: ranks may decode unequal passes
    with par.micro(model, last=i == n - 1): loss.backward()   # reduce-scattered each micro-batch, all-reduced on the last

`train.parallel`: none (one process, no engine), replicate (every rank holds the whole model, gradients
all-reduced: DDP semantics, for LoRA as d1 and dllm run it; frozen weights stay outside FSDP2), shard
(weights, gradients and optimizer state sharded: ZeRO-3, for full fine-tuning), hybrid (shard within a
node, replicate across nodes), auto (none at one process; LoRA -> replicate; full -> shard, hybrid on
several nodes). The trainable weights are kept in
fp32 (master weights); on CUDA the passes compute in bf16 (`MixedPrecisionPolicy`), gradients reduced in fp32.
"""

from __future__ import annotations

import datetime
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..config import ConfigError

TORCH_MIN = (2, 7)  # fully_shard's ignored_params (pytorch PR 146631, first released in torch 2.7); pyproject.toml


def require_torch(version: str | None = None) -> None:
    """The engine's one-line refusal below torch 2.7, where fully_shard has no ignored_params."""
    from torch.torch_version import TorchVersion

    version = version or torch.__version__
    if TorchVersion(version) < TORCH_MIN:
        raise ConfigError(
            f"train.parallel needs torch >= {'.'.join(map(str, TORCH_MIN))} (FSDP2's fully_shard with "
            f"ignored_params); this is torch {version}: pip install 'torch>=2.7', or run one process "
            "with train.parallel=none"
        )


MODES = {"auto": "auto", "none": "none", "replicate": "replicate", "shard": "shard", "hybrid": "hybrid"}


def backend() -> str:
    """The process group's backend: gloo for CPU tensors, NCCL for CUDA ones, both where CUDA is present
    (NCCL alone cannot move a CPU tensor: an all-gather of CPU rewards under `nccl` raises)."""
    return "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"


def rank_and_world() -> tuple[int, int]:
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def launched_world() -> int:
    """The number of processes torchrun (or accelerate launch) started; 1 outside a launcher."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def init_process_group(timeout_s: int | None = None) -> None:
    """Join the launcher's process group once (a no-op with one process). `accelerate launch` sets the
    same variables; its DEEPSPEED and FSDP modes are refused: the engine here is `train.parallel`. A collective
    that waits longer than `timeout_s` (env DACA_BENCH_DIST_TIMEOUT_S, default 1800) fails instead of hanging."""
    if launched_world() <= 1 or dist.is_initialized():
        return
    timeout_s = timeout_s or int(os.environ.get("DACA_BENCH_DIST_TIMEOUT_S", "1800"))
    kind = os.environ.get("ACCELERATE_DISTRIBUTED_TYPE", "").upper()
    if kind in {"DEEPSPEED", "FSDP"}:
        raise ConfigError(
            f"accelerate launch with distributed_type {kind}: daca-bench shards with its own "
            "train.parallel (FSDP2); launch with an accelerate config of type MULTI_GPU (or "
            "torchrun) and set train.parallel=shard or replicate"
        )
    kw = {}
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        kw["device_id"] = torch.device("cuda", local)
    dist.init_process_group(backend(), timeout=datetime.timedelta(seconds=timeout_s), **kw)


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def resolve(mode: str, lora: bool, world: int, nodes: int = 1) -> str:
    """train.parallel -> the mode this run uses (auto's choice; none refused for several processes)."""
    if mode not in MODES:
        raise ConfigError(f"train.parallel={mode!r}: use one of {', '.join(MODES)}")
    if mode == "auto":
        return "none" if world == 1 else "replicate" if lora else "hybrid" if nodes > 1 else "shard"
    if mode == "none" and world > 1:
        raise ConfigError(
            f"train.parallel=none runs one process; this launch has {world}: use auto, replicate or shard"
        )
    if mode == "hybrid" and world % max(1, nodes):
        raise ConfigError(f"train.parallel=hybrid: {world} processes do not split evenly over {nodes} nodes")
    return mode


def shard_units(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The repeated blocks FSDP2 shards one by one: the classes the model names in `_no_split_modules`
    (LLaDABlock, DreamDecoderLayer; LLaDA2's decoder layers and, inside them, each MoE layer's expert set),
    else the members of its longest ModuleList (BertLayer); never a module holding a weight tied to one
    outside it (BERT's embeddings and its output layer: they stay with the root, in one group). A unit
    nested in another comes before it (fully_shard goes from the inside out); otherwise the model's order."""
    from collections import Counter

    names: set[str] = set()
    for m in model.modules():
        names.update(getattr(m, "_no_split_modules", None) or ())
    units = [m for m in model.modules() if type(m).__name__ in names]
    if not units:
        lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
        units = list(max(lists, key=len)) if lists else []
    uses = Counter(id(p) for _, p in model.named_parameters(remove_duplicate=False))

    def self_contained(unit) -> bool:
        inside = Counter(id(p) for _, p in unit.named_parameters(remove_duplicate=False))
        return all(uses[k] == n for k, n in inside.items())

    depth = {id(m): name.count(".") + bool(name) for name, m in model.named_modules()}
    return sorted((u for u in units if self_contained(u)), key=lambda u: -depth[id(u)])


@dataclass
class Parallel:
    mode: str  # none | replicate | shard | hybrid
    rank: int = 0
    world: int = 1
    offload: bool = False

    @classmethod
    def start(
        cls, setting: str = "auto", lora: bool = False, offload: bool = False, load_in_4bit: bool = False
    ) -> Parallel:
        """Join the process group and resolve train.parallel (or sft.parallel) for this launch."""
        init_process_group()
        rank, world = rank_and_world()
        nodes = max(1, world // int(os.environ.get("LOCAL_WORLD_SIZE", world)))
        mode = resolve(setting, lora, world, nodes)
        if load_in_4bit and mode != "none":
            raise ConfigError(
                f"train.load_in_4bit=true cannot run under train.parallel={mode}: FSDP2 loses the 4-bit "
                "weights' metadata when it wraps them; use a bfloat16 base (train.load_in_4bit=false) "
                "on several GPUs, or one process"
            )
        return cls(mode, rank, world, offload)

    @property
    def engine(self) -> bool:
        return self.mode != "none"

    def device_type(self) -> str:
        return "cuda" if torch.cuda.is_available() else "cpu"

    def mesh(self):
        from torch.distributed.device_mesh import init_device_mesh

        if not dist.is_initialized():  # the engine at one process (a benchmark, a one-GPU full fine-tune)
            dist.init_process_group(backend(), store=dist.HashStore(), rank=0, world_size=1)
        local = int(os.environ.get("LOCAL_WORLD_SIZE", self.world))
        shape = {"replicate": (self.world, 1), "shard": (1, self.world), "hybrid": (self.world // local, local)}[
            self.mode
        ]
        return init_device_mesh(self.device_type(), shape, mesh_dim_names=("replicate", "shard"))

    def wrap(self, model: torch.nn.Module, trainable: bool = True) -> torch.nn.Module:
        """FSDP2 over each repeated block, then the root; trainable weights in fp32 first (master weights).
        A model without trainable weights (a full fine-tune's reference) is sharded the same way."""
        if trainable:
            for p in model.parameters():
                if p.requires_grad and p.dtype != torch.float32:
                    p.data = p.data.float()
        if not self.engine:
            return model
        require_torch()
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

        mesh = self.mesh()
        mp = (
            MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            if self.device_type() == "cuda"
            else MixedPrecisionPolicy()
        )
        # replicate: frozen weights (LoRA's base) stay plain tensors outside FSDP2, one copy per GPU as d1 and
        # dllm hold it; managed, FSDP2 would copy them into buffers of its own for every forward
        frozen = {p for p in model.parameters() if not p.requires_grad} if self.mode == "replicate" else set()
        kw = dict(
            mesh=mesh,
            mp_policy=mp,
            offload_policy=CPUOffloadPolicy() if self.offload else OffloadPolicy(),
            ignored_params=frozen or None,
        )
        for unit in shard_units(model):
            fully_shard(unit, **kw)
        fully_shard(model, **kw)
        return model

    @staticmethod
    def _fsdp(model) -> list:
        from torch.distributed.fsdp import FSDPModule

        return [m for m in model.modules() if isinstance(m, FSDPModule)]

    @contextmanager
    def rollout(self, *models):
        """Every FSDP unit of `models` unsharded and kept so for the block: forward passes inside make no
        collective, so ranks that decode different numbers of passes (threshold decoding, early stops)
        never wait on each other. Entered by every rank (the unshard itself is collective)."""
        units = [u for m in models if m is not None for u in self._fsdp(m)]
        roots = {id(m) for m in models if m is not None}
        for u in units:
            u.set_reshard_after_forward(False, recurse=False)
            u.unshard()
        try:
            yield
        finally:
            for u in units:
                u.reshard()
                # after it, FSDP2's own defaults: each block resharded after its forward, the root (embedding and
                # output layer) kept whole from the forward to the backward, so a micro-batch gathers it once
                u.set_reshard_after_forward(id(u) not in roots, recurse=False)

    @contextmanager
    def micro(self, model, last: bool):
        """Backward of one micro-batch: gradients reduce-scattered on every micro-batch, so each rank only ever
        holds its shard of them (as torchtitan does; deferring the whole sync would keep the unsharded fp32
        gradient on every rank until the last one: +4 bytes per parameter), and all-reduced across replicas
        (`replicate`, `hybrid`) only on the last."""
        for u in self._fsdp(model)[:1]:  # the root sets it for every unit below it
            u.set_requires_gradient_sync(True)
            u.set_requires_all_reduce(last or self.mode == "shard")  # shard: one replica, nothing to defer
        yield

    def check_shared(self, out) -> None:
        """Every process must see the run folder rank 0 writes (one folder on a shared filesystem for all
        nodes): rank 0 writes a token there, every rank reads it back, or the run stops in one line."""
        if self.world == 1:
            return
        token = f"{os.getpid()}-{time.time_ns()}"
        if self.rank == 0:
            (out / ".rendezvous").write_text(token)
        token = self.broadcast_object(token)
        self.barrier()
        try:
            seen = (out / ".rendezvous").read_text() == token
        except OSError:
            seen = False
        missing = [r for r, ok in enumerate(self.gather_objects(seen)) if not ok]
        if missing:
            raise ConfigError(
                f"the run folder {out} is not shared by every process (rank{'s' * (len(missing) > 1)} "
                f"{', '.join(map(str, missing))} cannot read rank 0's files there); give every node one "
                "folder on a shared filesystem (--output-dir)"
            )

    def full_state(self, model) -> dict | None:
        """The whole model's weights gathered into rank 0's CPU memory (None on the other ranks); every
        rank calls it. For final/: a plain save_pretrained folder written from a fresh CPU copy."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        return full if self.rank == 0 else None

    # collectives over every rank; each is the identity with one process
    def all_sum(self, x: torch.Tensor) -> torch.Tensor:
        if self.world > 1:
            x = x.clone()
            dist.all_reduce(x)
        return x

    def reduce(self, x: torch.Tensor, op: str = "sum") -> torch.Tensor:
        """Elementwise sum, min or max of equal-shaped tensors over every rank (a copy; the identity at one process)."""
        ops = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}
        if op not in ops:
            raise ValueError(f"reduce op {op!r}; choose from {', '.join(ops)}")
        if self.world == 1:
            return x
        x = x.clone()
        dist.all_reduce(x, op=ops[op])
        return x

    def agree_min(self, value: int | None) -> int | None:
        """One value on every rank: the smallest (a likelihood chunk size sized from each rank's free memory)."""
        if self.world == 1 or value is None:
            return value
        t = torch.tensor([value], dtype=torch.int64)
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
        return int(t.item())

    def any(self, flag: bool) -> bool:
        """True on every rank when any rank's flag is (a stop signal, a guard)."""
        if self.world == 1:
            return flag
        t = torch.tensor([int(bool(flag))])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """Equal-shaped tensors of every rank, concatenated in rank order along dim 0."""
        if self.world == 1:
            return x
        flag = x.dtype == torch.bool  # gloo moves no bool tensors
        y = x.to(torch.uint8) if flag else x.contiguous()
        parts = [torch.empty_like(y) for _ in range(self.world)]
        dist.all_gather(parts, y)
        out = torch.cat(parts)
        return out.bool() if flag else out

    def gather_objects(self, obj) -> list:
        if self.world == 1:
            return [obj]
        out = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    @staticmethod
    def close() -> None:
        """Leave the process group at the end of a run (torch warns when a process exits without it)."""
        if dist.is_initialized():
            dist.destroy_process_group()

    def broadcast_object(self, obj):
        if self.world == 1:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]
