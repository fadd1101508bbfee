"""The task registry: every file in `tasks/` registers its builders with `@register_task`.

    from daca_bench.registry import get_task, list_tasks
    task = get_task("arithmetic", split="train", n=512, seed=0)

Tasks come from three places: the files of the shipped `tasks/` folder, the folders named in
the DACA_BENCH_TASKS environment variable (os.pathsep-separated; `daca-bench --tasks-dir DIR`
sets it), and installed packages that declare an entry point in the group `daca_bench.tasks`
whose value is a module that registers its tasks when imported (see tasks/README.md).
A task may also declare how it is posed under a protocol (`register_protocol`: gsm8k under d1 is d1's
system prompt, prefill, rewards and verdict); get_task(name, protocol=...) builds it. Try `daca-bench tasks`.
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import importlib.util
import inspect
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import ConfigError, UnknownTaskError
from .resources import data_dir
from .types import CheckedVerify, Sample, Task

TASKS_DIR = data_dir("tasks")
ENTRY_POINT_GROUP = "daca_bench.tasks"
FAMILIES = ("math", "code", "constraint", "json")
# The tasks daca-bench ships (the files of its tasks/ folder): a fixed list, never where a file lives, so that
# a task of one's own written into tasks/ (where `new-task` writes by default) is never taken for one of these
# (the paper's gains stand beside these only: experiments/analysis/variants.py). tests/unit/analysis/test_accuracy.py checks
# that it names exactly the tasks the shipped folder registers.
SHIPPED_TASKS = frozenset(
    {
        "arithmetic",
        "arithmetic_tiny",
        "countdown",
        "countdown_d1",
        "countdown_tiny",
        "gsm8k",
        "humaneval",
        "json_schema",
        "json_tiny",
        "math500",
        "mbpp",
        "python_tiny",
        "sudoku",
        "sudoku_d1",
        "sudoku_tiny",
    }
)


@dataclass(frozen=True)
class TaskSpec:
    name: str
    family: str
    version: int
    splits: tuple[str, ...]
    build: Callable[..., Task]
    tiny: bool = False  # one of the tiny synthetic families of the CPU default
    description: str = ""
    cluster: str | Callable[[Sample], object] | None = None  # what items cluster on (None: each item alone)
    partial_credit: bool = False  # wrong / no_answer / timeout may score in [0, 1] (else exactly 0)
    shaped_range: tuple[float, float] | None = None  # a shaped reward's range (None: types.SHAPED_RANGES)

    def cluster_of(self, sample: Sample) -> str:
        """The key SAMPLE's cluster is known by: what the task's split is keyed on where several items
        share it (a sudoku's solution grid), else the item's own id. Tables pair and resample by it."""
        if self.cluster is None:
            return sample.id
        key = self.cluster(sample) if callable(self.cluster) else sample.metadata.get(self.cluster)
        return sample.id if key is None else str(key)


_REGISTRY: dict[str, TaskSpec] = {}
_POSED: dict[tuple[str, str], Callable[..., Task]] = {}  # (task, protocol) -> the builder of the task so posed
RETIRED = {"gsm8k_d1": ("gsm8k", "d1"), "math500_d1": ("math500", "d1")}  # old task name -> (task, protocol)
_loaded: frozenset | None = None  # the task folders loaded (None: nothing yet, plug-ins neither)


def register_task(
    name: str,
    *,
    family: str,
    version: int,
    splits=("train", "test"),
    tiny: bool = False,
    description: str = "",
    cluster=None,
    partial_credit: bool = False,
    shaped_range: tuple[float, float] | None = None,
):
    """Decorator: register a builder `f(split, n, seed, **kw) -> Task` under `name`. `cluster`: the
    metadata field (or a function of the sample) that items cluster on, where several items share
    what the split is keyed on (sudoku: the solution grid); None where every item stands alone.
    `partial_credit`: a wrong answer may score between 0 and 1 (accuracy still counts correct ones
    only); `shaped_range`: the (low, high) of a shaped reward where types.SHAPED_RANGES's is not it.
    Every Task the builder returns verifies through types.CheckedVerify: a value outside these is a
    RewardError naming the task and the completion, never a number in a table."""
    if family not in FAMILIES:
        raise ValueError(f"task {name!r}: family {family!r} not in {FAMILIES}")

    def wrap(fn):
        if name in _REGISTRY and _REGISTRY[name].build.__module__ != fn.__module__:
            raise ConfigError(
                f"task {name!r} is registered twice: in {_source(_REGISTRY[name].build)} and in "
                f"{_source(fn)}; task names are global: rename one, or drop one of the two folders "
                "or plug-ins"
            )
        _REGISTRY[name] = TaskSpec(
            name,
            family,
            version,
            tuple(splits),
            _checked(fn, name, partial_credit, shaped_range),
            tiny,
            description or (fn.__doc__ or "").strip().split("\n")[0],
            cluster,
            bool(partial_credit),
            tuple(shaped_range) if shaped_range else None,
        )
        return fn

    return wrap


def register_protocol(task: str, protocol: str):
    """Decorator: register how TASK is posed under PROTOCOL, a builder with the task's own arguments that
    returns the task in the protocol's prompts, data and verdicts (tasks/math_reasoning.py: gsm8k and
    math500 under d1). get_task(TASK, protocol=PROTOCOL) builds it; daca_bench.eval.protocols poses every
    task that declares a row's protocol this way; RL and SFT pose it with train.protocol / sft.protocol."""

    def wrap(fn):
        _POSED[(task, protocol)] = fn
        return fn

    return wrap


def task_protocols(name: str) -> tuple[str, ...]:
    """The protocols NAME declares a posing for (register_protocol)."""
    load_all()
    return tuple(sorted(p for t, p in _POSED if t == name))


PROTOCOL_PROMPTS_ENV = {"d1": "DACA_BENCH_D1_PROMPTS"}


def protocol_wording(protocol: str, task: str, split: str, ours: str) -> str:
    """A protocol's prompt text for TASK's SPLIT: ours (the source's layout and instructions in this
    project's words), or the source's exact wording a user keeps in a JSON file named by the protocol's
    variable (d1: $DACA_BENCH_D1_PROMPTS = {"gsm8k": {"train": "...", "test": "..."}, "countdown_d1": ...},
    copied by the user from the source's code; this project does not ship it). A file written for a retired
    task name (gsm8k_d1) is read under the name that replaced it."""
    import json

    var = PROTOCOL_PROMPTS_ENV[protocol]
    file = os.environ.get(var)
    if not file:
        return ours
    try:
        table = json.loads(Path(file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{var}={file}: cannot read it as JSON ({exc})") from None
    table = table if isinstance(table, dict) else {}
    old = [k for k, v in RETIRED.items() if v == (task, protocol)]
    entry = next((table[k] for k in [task, *old] if k in table), {})
    text = entry.get(split) if isinstance(entry, dict) else None
    return text if isinstance(text, str) else ours


def _checked(fn, name: str, partial_credit: bool, shaped_range):
    """FN with its Tasks' verifiers checked (types.CheckedVerify); signature, module and file are FN's."""

    @functools.wraps(fn)
    def build(*args, **kw) -> Task:
        task = fn(*args, **kw)
        if not isinstance(task, Task) or isinstance(task.verify, CheckedVerify):
            return task
        return replace(task, verify=CheckedVerify(task.verify, name, partial_credit, shaped_range))

    return build


def _source(fn) -> str:
    """Where a builder was written: its file, else its module."""
    fn = inspect.unwrap(fn)
    return getattr(getattr(fn, "__code__", None), "co_filename", None) or fn.__module__


def task_source(spec: TaskSpec) -> str:
    """The file that registered SPEC (a task folder's, or an installed plug-in's module file)."""
    return _source(spec.build)


def _task_dirs() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("DACA_BENCH_TASKS", "").split(os.pathsep) if p]
    seen, out = set(), []
    for folder in [TASKS_DIR, *extra]:  # a folder named twice (the shipped one given as --tasks-dir) loads once
        key = folder.resolve() if folder.is_dir() else folder
        if key not in seen:
            seen.add(key)
            out.append(folder)
    return out


def load_file(path: str | Path) -> None:
    """Import one task file, registering its tasks (once; a second call is a no-op). A file of the same
    name already loaded from another folder, a syntax error or a failing import is a ConfigError of one
    line naming the file(s) (and the line)."""
    path = Path(path).resolve()
    modname = f"daca_bench_tasks.{path.stem}"
    have = sys.modules.get(modname)
    if have is not None:
        first = Path(getattr(have, "__file__", "") or "").resolve()
        if first == path:
            return
        raise ConfigError(
            f"two task files named {path.name}: {first} and {path} (a task file's name must be unique "
            "over every task folder); rename one"
        )
    spec = importlib.util.spec_from_file_location(modname, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except ConfigError:
        del sys.modules[modname]
        raise
    except SyntaxError as exc:
        del sys.modules[modname]
        raise ConfigError(
            f"{exc.filename}:{exc.lineno}: syntax error in a task file ({exc.msg}); fix it, or move "
            "the file out of the task folder"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - a task file that fails to import names itself, in one line
        del sys.modules[modname]
        line = next(
            (f.lineno for f in reversed(traceback.extract_tb(exc.__traceback__)) if Path(f.filename).resolve() == path),
            "?",
        )
        raise ConfigError(
            f"{path}:{line}: the task file failed to import ({type(exc).__name__}: {exc}); fix it, or "
            "move it out of the task folder (--traceback shows where)"
        ) from exc


def load_all() -> None:
    """Import every `*.py` in the task folders once, and the plug-ins (nothing heavy happens at import).
    A folder added to DACA_BENCH_TASKS later (`--tasks-dir` in a process that listed tasks) loads on the next call."""
    global _loaded
    dirs = _task_dirs()
    if _loaded is not None and all(d.resolve() in _loaded for d in dirs if d.is_dir()):
        return
    done = set(_loaded or ())
    for folder in dirs:
        if not folder.is_dir():
            if folder == TASKS_DIR:
                continue
            raise ConfigError(
                f"DACA_BENCH_TASKS (or --tasks-dir) names {folder}, which is not a folder; give a folder of task files"
            )
        if folder.resolve() in done:
            continue
        for path in sorted(folder.glob("*.py")):
            if not path.name.startswith("_"):
                load_file(path)
        done.add(folder.resolve())
    if _loaded is None:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                ep.load()
            except Exception as exc:  # a broken plug-in names itself instead of hiding every task
                raise ImportError(
                    f"task plug-in {ep.name!r} ({ep.value}, group {ENTRY_POINT_GROUP}) "
                    f"failed to load: {type(exc).__name__}: {exc}"
                ) from exc
    _loaded = frozenset(done)


def list_tasks() -> list[TaskSpec]:
    load_all()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def task_spec(name: str) -> TaskSpec:
    load_all()
    if name in RETIRED and name not in _REGISTRY:
        task, protocol = RETIRED[name]
        raise UnknownTaskError(
            f"task {name!r} is now {task!r} under protocol {protocol!r}: train.task={task} with "
            f"train.protocol={protocol} (sft.protocol for SFT), eval --task {task} --protocol "
            f"{protocol}, get_task({task!r}, protocol={protocol!r})"
        )
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(_REGISTRY))}"
        raise UnknownTaskError(
            f"unknown task {name!r}{hint}; `daca-bench tasks` lists them; a task of your own: "
            "--tasks-dir DIR (the folder of its file), DACA_BENCH_TASKS=DIR or an installed plug-in"
        )
    return _REGISTRY[name]


def get_task(name: str, split: str = "test", protocol: str = "", **kw) -> Task:
    """NAME's SPLIT (builder arguments KW: n, seed, path, records, shaping, ...), posed under PROTOCOL
    where given (a protocol the task does not declare is one line)."""
    spec = task_spec(name)
    if split not in spec.splits:
        raise ValueError(f"task {name!r} has no split {split!r}; splits: {', '.join(spec.splits)}")
    if not protocol:
        return spec.build(split=split, **kw)
    build = _POSED.get((name, protocol))
    if build is None:
        have = task_protocols(name)
        raise ConfigError(
            f"task {name!r} declares no protocol {protocol!r} (its protocols: "
            f"{', '.join(have) or 'none'}); drop the protocol, or pose the task in its file "
            "(registry.register_protocol)"
        )
    return build(split=split, **kw)


def task_record(name: str, samples=()) -> dict:
    """What a cell keeps of its task (summary.json's `task_record`), so that a table reads it where the
    task is not registered: family, version, cluster key (a metadata field, a function's name, or None:
    every item its own) and, where the task declares one, the cluster of each of SAMPLES by id."""
    spec = task_spec(name)
    key = (
        spec.cluster
        if spec.cluster is None or isinstance(spec.cluster, str)
        else getattr(spec.cluster, "__name__", "function")
    )
    out = {"name": spec.name, "family": spec.family, "version": spec.version, "cluster": key}
    if spec.cluster is not None:
        out["clusters"] = {s.id: spec.cluster_of(s) for s in samples}
    return out


def prompt_digest(prompt: str) -> str:
    """sha256 (16 hex digits) of a prompt's text: what a test set's exclusion list names."""
    import hashlib

    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]


def read_excluded(path: str | Path) -> frozenset[str]:
    """The prompt digests listed in PATH, one per line as `<digest> <id>` ('#' starts a comment); a
    `configs/...` path missing here is read from the configs shipped with the package."""
    from .config import _preset_path

    try:
        lines = _preset_path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"train.test_exclude={path}: cannot read the list of prompts ({exc.strerror})") from None
    return frozenset(line.split()[0] for line in lines if line.split("#", 1)[0].strip())


def ids_digest(ids) -> str:
    """sha256 (16 hex digits) of a collection of strings, order-free: names a test set or an exclusion list."""
    import hashlib

    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:16]


def test_set(t) -> Task:
    """An RL config's evaluation set (TrainConfig t: task, eval_split, n_eval, test_seed, test_exclude),
    the one every caller scores or checks: the trainer, the RL start, the canvas check, the design."""
    return draw_test(t.task, t.eval_split, t.n_eval, t.test_seed, t.test_exclude, getattr(t, "protocol", ""))


def draw_test(name: str, split: str, n: int | None, seed: int, exclude: str | Path = "", protocol: str = "") -> Task:
    """A fixed evaluation set: the first N samples of NAME's SPLIT drawn with SEED (get_task's own
    draw). With EXCLUDE (a file of prompt digests: what earlier tables scored), the first N samples
    of the draw of 2N + len(excluded) whose prompt text is neither listed nor repeated: N distinct
    prompts none of those tables scored, the same on every machine. Fewer left is refused (one line)."""
    if not exclude:
        return get_task(name, split=split, n=n, seed=seed, protocol=protocol)
    if n is None:
        raise ConfigError("train.test_exclude needs train.n_eval: how many prompts to keep after excluding")
    skip = read_excluded(exclude)
    task = get_task(name, split=split, n=2 * n + len(skip), seed=seed, protocol=protocol)
    kept, seen = [], set(skip)
    for s in task.samples:
        digest = prompt_digest(s.prompt)
        if digest not in seen:
            seen.add(digest)
            kept.append(s)
            if len(kept) == n:
                break
    if len(kept) < n:
        raise ConfigError(
            f"{name} {split}: only {len(kept)} new prompts are left after excluding the {len(skip)} "
            f"listed in {exclude} (train.n_eval={n}); lower n_eval or draw from a larger split"
        )
    return replace(task, samples=kept)


# ---- CLI: `daca-bench tasks` ----------------------------------------------------------
def configure(parser) -> None:
    parser.add_argument("--family", choices=FAMILIES, help="only this family")
    parser.add_argument("--tiny", action="store_true", help="only the tiny families of the CPU default")


def run(args) -> int:
    rows, missing = [], False
    for spec in list_tasks():
        if args.family and spec.family != args.family or getattr(args, "tiny", False) and not spec.tiny:
            continue
        sizes = []
        for split in spec.splits:
            try:
                sizes.append(f"{split}={len(spec.build(split=split).samples)}")
            except Exception:  # a hub dataset that is neither reachable nor cached here, say
                sizes.append(f"{split}=?")
                missing = True
        rows.append(
            (spec.name, spec.family, str(spec.version), "yes" if spec.tiny else "", " ".join(sizes), spec.description)
        )
    header = ("name", "family", "version", "tiny", "splits (sizes)", "description")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(5)]
    for r in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5])
    if missing:
        print(
            "\n?: data not available here (hub dataset not reachable or cached); load a local copy "
            "with get_task(name, path=FILE) -- see tasks/README.md"
        )
    return 0
