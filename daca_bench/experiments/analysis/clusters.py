"""Each scored prompt's cluster: the unit the tables pair and resample by.

A task declares what its items cluster on (`register_task(..., cluster="solution")`: sudoku
puzzles of one solution grid; `python_tiny`'s instances of one target function, shown other
examples); where it declares nothing each item is its own cluster. A cell knows its task: the
trainer writes summary.json's `task_record` (registry.task_record: family, version, cluster key and
each scored prompt's cluster), and an eval.jsonl row may carry its `cluster`; so a table reads the
same clusters wherever it runs, the task registered or not. Only for cells written before that
record, the key comes from the task's own samples, rebuilt from the cells' configs (task, test
split, size and seed) and matched by id; the task must then be registered, or the table stops
with one line naming how to load it (`unregistered`).

    keys = cluster_keys("sudoku_tiny", configs, ids)   # id -> cluster key (None: every item alone)
"""

from __future__ import annotations

from ...errors import ConfigError


def recorded(rows: list[dict]) -> dict[str, str]:
    """id -> cluster for the rows of an eval.jsonl (its records, cellstore.Cell.rows) that carry one."""
    return {row["id"]: str(row["cluster"]) for row in rows if row.get("cluster") is not None}


def _test_sets(configs: list[dict]) -> list[tuple[str, int | None, int, str]]:
    sets = {
        (
            c["train"].get("eval_split", "test"),
            c["train"].get("n_eval"),
            c["train"].get("test_seed", 0),
            c["train"].get("test_exclude", ""),
        )
        for c in configs
    }
    return sorted(sets, key=str)


def cluster_keys(task: str, configs: list[dict], ids, known: dict[str, str] | None = None) -> dict[str, str] | None:
    """id -> cluster key for IDS of TASK (None where the task declares no clusters and nothing was
    recorded: every item is its own). KNOWN: keys recorded in eval.jsonl; the rest come from the
    test sets the CONFIGS name. An id found in none of them is an error (one line)."""
    from ...registry import draw_test

    known = dict(known or {})
    ids = set(ids)
    missing = ids - set(known)
    if not missing:  # every prompt's cluster recorded: no registry needed
        return {i: known[i] for i in ids} if known else None
    spec = registered(task, "the cluster of its scored prompts")
    if spec.cluster is None:
        return {i: known.get(i, i) for i in ids} if known else None
    for split, n, seed, exclude in _test_sets(configs):
        if not missing:
            break
        for s in draw_test(task, split, n, seed, exclude).samples:
            if s.id in missing:
                known[s.id] = spec.cluster_of(s)
        missing -= set(known)
    if missing:
        raise ConfigError(
            f"{task}: {len(missing)} scored prompt(s) (e.g. {sorted(missing)[0]}) are in none of the "
            "test sets the cells' configs name, so their cluster is unknown; rescore them or record "
            "`cluster` in eval.jsonl"
        )
    return {i: known[i] for i in ids}


def unregistered(task: str, what: str, where: str = "") -> str:
    """The one line for a task a table needs (WHAT of it) that its cells do not record and that is not registered."""
    return (
        f"{where + ': ' if where else ''}task {task!r} is not registered here and its cells do not record {what} "
        "(written before cells recorded their task); load the task: `--tasks-dir DIR` (the folder of its file), "
        "DACA_BENCH_TASKS=DIR, or install its plug-in"
    )


def registered(task: str, what: str, where: str = ""):
    """TASK's registry spec, or a ConfigError naming how to load it (`unregistered`)."""
    from ...errors import UnknownTaskError
    from ...registry import task_spec

    try:
        return task_spec(task)
    except UnknownTaskError:
        raise ConfigError(unregistered(task, what, where)) from None
