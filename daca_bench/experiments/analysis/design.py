"""The pre-registered design of a confirmatory run (`design.json`) and the planned comparison families.

A confirmatory preset writes design.json into its results folder (beside cells/) before its first
cell starts (`write_design`); `daca-bench table` reads it back (`read_design`) and calls the table
confirmatory only when every cell ran under it (`disagreements`: same tasks, seeds, steps, test
set, and a recorded `git` equal to the design's clean commit, or, for a design committed before
its run, a clean cell whose `code_tree` equals the design's: the same code one commit later). A folder without one is exploratory.
`families` says which family each comparison belongs to: the design's, else the preset's declared
ones, else DEFAULT_COMPARISONS; a comparison in neither family is exploratory.

    design = read_design(folder)            # None, or a validated dict (schema: `validate`)
    problems = disagreements(design, configs)   # [] = the cells ran under the design
"""

from __future__ import annotations

import json
from pathlib import Path

from ...errors import ConfigError

FILE = "design.json"
ASIDE = "design.registered.json"  # a design registered before the cells, set aside as chosen after looking
SCHEMA = 1
PRIMARY, SECONDARY, EXPLORATORY = "primary", "secondary", "exploratory"
MULTIPLICITY = ("holm", "bonferroni", "none")
# per area: the method against its baseline and the baseline against its RL start are primary; the
# other variants against the baseline are secondary; anything else (a reading, a post-hoc pair) is exploratory
DEFAULT_COMPARISONS = {
    PRIMARY: [("+DACA", "baseline"), ("baseline", "start")],
    SECONDARY: [("+DPS", "baseline"), ("+SML", "baseline")],
}
_TOP = {
    "schema": int,
    "preset": str,
    "commit": str,
    "alpha": float,
    "multiplicity": str,
    "bar": str,
    "families": dict,
    "comparisons": dict,
}
_FAMILY = {"task": str, "seeds": list, "steps": int, "test": dict}
_TEST = {"split": str, "size": int, "seed": int, "draw": str}


def _bad(where: str, what: str) -> ConfigError:
    return ConfigError(f"{where}: {what}; see daca_bench/experiments/analysis/design.py for the design.json schema")


def _fields(d, spec: dict, where: str) -> None:
    if not isinstance(d, dict):
        raise _bad(where, f"expected an object, got {type(d).__name__}")
    missing = [k for k in spec if k not in d]
    if missing:
        raise _bad(where, f"missing {', '.join(missing)}")
    for k, kind in spec.items():
        ok = (
            isinstance(d[k], (int, float)) and not isinstance(d[k], bool)
            if kind is float
            else isinstance(d[k], kind) and not (kind is int and isinstance(d[k], bool))
        )
        if not ok:
            raise _bad(where, f"{k} must be {kind.__name__}, got {d[k]!r}")


def validate(d: dict, where: str = FILE) -> dict:
    """Check a design dict; return it unchanged or raise ConfigError (one line). The schema:

    {"schema": 1, "preset": "tiny-full", "commit": "<git describe --always --dirty>",
     "alpha": 0.05, "multiplicity": "holm", "bar": "<the decision rule, stated as what it is>",
     "families": {"<label>": {"task": "sudoku_tiny", "seeds": [0, ...], "steps": 32,
                              "test": {"split": "test", "size": 512, "seed": 0, "draw": "<how>"},
                              "other_steps": {"grpo baseline@+DACA-compute": 94}}},   # optional: an arm
                              # that runs other steps by design (the compute-matched baseline)
     "comparisons": {"primary": [{"family": "<label>", "variant": "+DACA", "vs": "baseline"}, ...],
                     "secondary": [...]}}        # optional "base" in a comparison (else every base)
    A `vs` of two words, "<base> <variant>" (e.g. "grpo +DACA"), names another base's row: a cross-base
    comparison, paired by seed and prompt like every other (results.extra_rows computes it).
    Optional "exploratory": "<reason>" (a design registered before its cells but chosen after looking):
    the table says so on its first line and is never confirmatory. Optional "power": its power analysis
    (analysis/power.py power_block: the MDE of every planned comparison under assumed variance components).
    Extra keys (a date, notes) are allowed and ignored."""
    _fields(d, _TOP, where)
    if d["schema"] != SCHEMA:
        raise _bad(where, f"schema {d['schema']} is not {SCHEMA}")
    if not 0 < d["alpha"] < 1:
        raise _bad(where, f"alpha {d['alpha']} is not in (0, 1)")
    if d["multiplicity"] not in MULTIPLICITY:
        raise _bad(where, f"multiplicity {d['multiplicity']!r} not in {MULTIPLICITY}")
    if not d["commit"].strip():
        raise _bad(where, "commit is empty")
    for label, fam in d["families"].items():
        _fields(fam, _FAMILY, f"{where} families.{label}")
        _fields(fam["test"], _TEST, f"{where} families.{label}.test")
        if not fam["seeds"] or not all(isinstance(s, int) and not isinstance(s, bool) for s in fam["seeds"]):
            raise _bad(where, f"families.{label}.seeds must be a non-empty list of integers")
        other = fam.get("other_steps", {})
        if not isinstance(other, dict) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in other.values()
        ):
            raise _bad(where, f"families.{label}.other_steps must map an arm to its integer steps")
    if set(d["comparisons"]) - {PRIMARY, SECONDARY} or PRIMARY not in d["comparisons"]:
        raise _bad(
            where, f"comparisons must hold {PRIMARY!r} (and may hold {SECONDARY!r}), got {sorted(d['comparisons'])}"
        )
    for fam_name, rows in d["comparisons"].items():
        for i, c in enumerate(rows):
            _fields(c, {"family": str, "variant": str, "vs": str}, f"{where} comparisons.{fam_name}[{i}]")
            if c["family"] not in d["families"]:
                raise _bad(where, f"comparisons.{fam_name}[{i}] names family {c['family']!r}, not in families")
            if len(c["vs"].split()) > 2 or not c["vs"].strip() or c["vs"] != " ".join(c["vs"].split()):
                raise _bad(
                    where, f"comparisons.{fam_name}[{i}].vs {c['vs']!r} is not '<variant>' or '<base> <variant>'"
                )
    if "exploratory" in d and not (isinstance(d["exploratory"], str) and d["exploratory"].strip()):
        raise _bad(where, f"exploratory must be a non-empty reason, got {d['exploratory']!r}")
    return d


MIN_STARTS = 5  # fewer SFT starts give the start term under 4 df: an MDE several times the seed-only one


def starts_warning(d: dict) -> str:
    """One line when a design's comparisons generalise over SFT starts (compute.random_effect "sft_start")
    and it has fewer than MIN_STARTS of them ('' otherwise)."""
    compute = d.get("compute") or {}
    starts = compute.get("sft_starts") or []
    if compute.get("random_effect") != "sft_start" or len(starts) >= MIN_STARTS:
        return ""
    return (
        f"warning: {d.get('preset', 'this design')} generalises over SFT starts with {len(starts)} of them (fewer "
        f"than {MIN_STARTS}): the start term has {max(len(starts) - 1, 0)} df, so its intervals are wide and a null "
        "says little (analysis/power.py; tiny-compute-starts has 20)"
    )


def read_design(folder: str | Path) -> dict | None:
    """The validated design.json of a results folder, or None when it has none."""
    path = Path(folder) / FILE
    if not path.is_file():
        return None
    try:
        d = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    return validate(d, str(path))


def _same(a: dict, b: dict) -> bool:
    keep = lambda d: {k: v for k, v in d.items() if k not in ("written", "date")}  # noqa: E731
    return keep(a) == keep(b)


def write_design(folder: str | Path, design: dict) -> Path:
    """Validate DESIGN and write it to FOLDER/design.json, before any cell starts. A folder that
    already holds a different design is refused (one line); the same design is left as it is."""
    validate(design)
    path = Path(folder) / FILE
    if path.is_file():
        old = read_design(folder)
        if not _same(old, design):
            diff = sorted(
                k for k in set(old) | set(design) if old.get(k) != design.get(k) and k not in ("written", "date")
            )
            raise ConfigError(
                f"{path} holds another design (differs in {', '.join(diff)}); give a new output folder "
                "or delete it to re-register (a changed design is a new, exploratory run)"
            )
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(design, indent=2, sort_keys=True) + "\n")
    return path


def disagreements(design: dict, configs: list[dict]) -> list[str]:
    """Why the cells (their config.json dicts) did not run under DESIGN: one short line per kind of
    mismatch, [] when they all did. The start's evaluation has no config and is not checked."""
    by_task = {f["task"]: (label, f) for label, f in design["families"].items()}
    commit = design["commit"]
    out = []
    if commit.endswith("-dirty"):
        out.append(f"the design was written from a dirty tree ({commit})")
    for cfg in configs:
        t = cfg.get("train", {})
        if t.get("task") not in by_task:
            out.append(f"task {t.get('task')} is not in the design")
            continue
        label, f = by_task[t["task"]]
        # an arm named in other_steps ("<base> <variant>") runs its own step count by design
        other = {n for arm, n in f.get("other_steps", {}).items() if arm.split()[0] == cfg.get("loss", {}).get("base")}
        steps = t.get("steps") if t.get("steps") in other else f["steps"]
        for what, have, want in (
            ("seed", t.get("seed"), None),
            ("steps", t.get("steps"), steps),
            ("test split", t.get("eval_split", "test"), f["test"]["split"]),
            ("test size", t.get("n_eval"), f["test"]["size"]),
            ("test seed", t.get("test_seed", 0), f["test"]["seed"]),
            ("test exclusion", t.get("test_exclude", ""), f["test"].get("exclude", "")),
        ):
            if what == "seed" and have not in f["seeds"]:
                out.append(f"{label}: seed {have} is not among the design's seeds")
            elif what != "seed" and have != want:
                out.append(f"{label}: {what} {have} where the design says {want}")
        same_code = (
            design.get("code_tree")
            and cfg.get("code_tree") == design["code_tree"]
            and not str(cfg.get("git", "")).endswith("-dirty")
        )
        if cfg.get("git") != commit and not same_code:
            out.append(f"{label}: a cell ran from {cfg.get('git') or 'an unrecorded commit'}, the design from {commit}")
    return sorted(set(out))


def declared(design: dict | None, preset_spec: dict | None = None) -> dict[str, list[dict]]:
    """The planned families as {'primary': [{'task'|'family', 'variant', 'vs'[, 'base']}], ...}:
    the design's (families resolved to tasks), else the preset's `comparisons` (a row that names its
    task matched by it alone: a label such as "sudoku" is no family a cell records), else the default
    (every task: DEFAULT_COMPARISONS)."""
    if design is not None:
        tasks = {label: f["task"] for label, f in design["families"].items()}
        return {
            fam: [{**{k: v for k, v in c.items() if k != "family"}, "task": tasks[c["family"]]} for c in rows]
            for fam, rows in design["comparisons"].items()
        }
    spec = (preset_spec or {}).get("comparisons")
    if spec:  # a row naming its task is matched by the task the cells record, not by the preset's label for it
        return {
            fam: [{k: v for k, v in c.items() if k != "family" or "task" not in c} for c in rows]
            for fam, rows in spec.items()
        }
    return {fam: [{"variant": v, "vs": vs} for v, vs in pairs] for fam, pairs in DEFAULT_COMPARISONS.items()}


def reference(vs: str, base: str) -> tuple[str, str]:
    """(base, variant) a comparison's `vs` names for a row of BASE: "grpo +DACA" -> ("grpo", "+DACA");
    a one-word vs ("baseline", "start") is the row's own base."""
    parts = vs.split()
    return (parts[0], parts[1]) if len(parts) == 2 else (base, vs)


def across(vs) -> bool:
    """Whether a table row's `vs` names another row by base and variant (the 'across bases' section)."""
    return isinstance(vs, str) and len(vs.split()) == 2


def block_family(family: str) -> str:
    """The family of a table block: "json [prefix]" (a grid over rollout settings) -> "json"."""
    return family.split(" [")[0]


def family_of(row: dict, planned: dict[str, list[dict]], labels: dict[str, str] | None = None) -> str:
    """PRIMARY, SECONDARY or EXPLORATORY for a table row (its base, task, variant, vs). A declared
    comparison matches on the keys it names (no task = every task; no base = every base);
    `labels` maps a task to its preset family label for comparisons that name a 'family' (a setting's
    block, "json [prefix]", is its family's)."""
    labels = labels or {}
    for fam in (PRIMARY, SECONDARY):
        for c in planned.get(fam, []):
            if c["variant"] != row["variant"] or reference(c["vs"], row["base"]) != reference(row["vs"], row["base"]):
                continue
            if "task" in c and c["task"] != row["task"]:
                continue
            if "family" in c and c["family"] not in (labels.get(row["task"]), block_family(row.get("family", ""))):
                continue
            if "base" in c and c["base"] != row["base"]:
                continue
            return fam
    return EXPLORATORY


def design_line(
    design: dict | None, configs: list[dict], folder, aside: dict | None = None, preset: str | None = ""
) -> str:
    """The table's first line: confirmatory (the cells ran under design.json), exploratory with its
    reason (a design that says `exploratory`, or one registered and set aside, ASIDE), not confirmatory
    (why), or exploratory (no design at all: a preset's folder (PRESET) has its declared families, a grid
    of one's own the default ones, design.DEFAULT_COMPARISONS)."""
    if design is None and aside is not None:
        why = aside.get("exploratory", "chosen after looking at these seeds")
        return (
            f"**Exploratory** ({why}): a design was registered before the first cell (kept as "
            f"{folder}/design.registered.json, commit {aside['commit']}), but chosen after looking at these "
            f"seeds' cells (its notes: {aside.get('notes', '').split('. ')[0]}); the decision rule is reported, "
            "nothing here is confirmed."
        )
    if design is None:
        return "**Exploratory**: no design.json in this folder (nothing was registered before the cells ran); " + (
            "the families below are the preset's declared ones."
            if preset
            else "the families below are the default ones: +DACA vs baseline and baseline vs start primary, "
            "+DPS and +SML vs baseline secondary."
        )
    problems = disagreements(design, configs)
    if design.get("exploratory"):
        ran = "the cells did not all run under it" if problems else "every cell ran under it"
        return (
            f"**Exploratory** ({design['exploratory']}): {folder}/design.json was registered before the first "
            f"cell (commit {design['commit']}) and {ran}, but the design was chosen after looking; the decision "
            "rule is reported, nothing here is confirmed."
        )
    if problems:
        more = f" and {len(problems) - 3} more" if len(problems) > 3 else ""
        return (
            f"**Not confirmatory**: the cells did not run under {folder}/design.json ({'; '.join(problems[:3])}{more})."
        )
    return (
        f"**Confirmatory**: every cell ran under {folder}/design.json (commit {design['commit']}, "
        f"{design['multiplicity']} at alpha {design['alpha']:g}); bar: {design['bar']}"
    )
