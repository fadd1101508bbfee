"""The presets of `daca-bench reproduce`, as data: the tiny families, the regime, the grids and
the paper-scale presets. No code runs here beyond building these values.

    from daca_bench.experiments.grid.presets import PRESETS, PICKS, family_of
    PRESETS["tiny"].families["sudoku"].task   # 'sudoku_tiny'

The picks of the confirmatory presets are read from the committed readings sweep
(results/tiny-readings/picks.json, shipped in the wheel as daca_bench/_data/readings/picks.json),
never repeated here. `comparisons` says, before a grid runs, which comparisons are primary and
which secondary (the design a confirmatory preset writes: experiments/grid/preregister.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from ...errors import UnavailableError
from ...resources import data_dir
from . import compute_grid
from .bases_grid import BLOCK_FIELD_KEYS, FIELD_BASES, PAPER_BASES, TINY_BASES_DESIGN, field_rows, planned_comparisons
from .readings import READINGS

FOUR = ("baseline", "+DPS", "+SML", "+DACA")


@dataclass(frozen=True)
class Family:
    """One tiny family: its task and canvas length L, decoded in L/2 steps (two tokens per
    step, as d1 decodes 256 tokens in 128 steps) for SFT's dev checks, rollouts and evaluation."""

    task: str
    gen_length: int
    sft_steps: int = 2500  # at most; SFT stops at the first dev evaluation that reaches the target
    sft_eval_every: int = 0  # 0 = the preset's; finer where accuracy jumps (4x4 sudoku: 0 % to 66 % in 100 steps)
    sft_target: float = 0.0  # 0 = the preset's; higher where the SFT curve is gradual and RL needs more correct samples
    rl: dict = field(default_factory=dict)  # this family's RL overrides (steps, training reward, test prompts), over
    # the preset's; a preset's picks set train.lr after them
    seeds: tuple = ()  # this family's seeds instead of the preset's (more where its comparisons are seed-bound)
    block: int = (
        0  # a block-diffusion model (model.block_size, SFT and RL) decoding blocks of this many; 0 = full attention
    )

    @property
    def canvas(self) -> dict:
        return {
            "gen_length": self.gen_length,
            "block_length": self.block or self.gen_length,
            "steps": self.gen_length // 2,
        }


@dataclass(frozen=True)
class TinyPreset:
    description: str
    families: dict  # family label -> Family
    rl_steps: int
    seeds: tuple = (0, 1)
    bases: tuple = ("grpo",)
    variants: tuple = FOUR
    sft_target: float = 0.10  # stop SFT at the first dev evaluation at or above this exact-match rate
    sft_eval_every: int = 100
    sft_dev: int = 128  # dev prompts (held out of the train split) for that check
    rl: dict = field(default_factory=dict)  # config overrides for every RL cell
    base_config: str = "configs/tiny.yaml"
    picks: dict = field(default_factory=dict)  # variant -> its picked reading's keys (readings.pick)
    readings: tuple = ()  # a readings sweep instead of variants: these READINGS at each of `lrs`
    lrs: tuple = ()
    confirmatory: bool = False  # writes design.json before its first cell; refuses a dirty tree
    arms: str = (
        ""  # "" = every base x every variant; "bases" = each base's own variants (experiments/grid/bases_grid.py)
    )
    # and grpo's compute-matched baseline, their lrs picked by a sweep run first (`selection`)
    selection: dict = field(default_factory=dict)  # the sweep: selection_seeds, selection_split, lr_grid, tuned
    design: str = ""  # its design.json, committed before its run (repository path); the run registers it
    notes: str = ""  # what its design says beyond the cells (design.json "notes")
    settings: dict = field(default_factory=dict)  # label -> config keys: every arm once per setting (axis
    # "setting"; the table gives each its own block: start, baseline vs start, each variant vs that baseline)
    sft_seeds: tuple = (0,)  # SFT starts (sft.seed): every arm runs from each (axis "sft_start": a random effect)
    exploratory: str = ""  # why a registered design is exploratory all the same (design.json "exploratory"): its
    # table's first line says so and never "Confirmatory"
    base_variants: dict = field(default_factory=dict)  # base -> its variants where fewer than `variants` (no +SML)
    base_keys: dict = field(default_factory=dict)  # base -> its config keys over `rl` (bases_grid.field_rows)


@dataclass(frozen=True)
class PaperPreset:
    description: str
    configs: tuple  # RL presets under configs/paper
    seeds: tuple = (0,)
    bases: tuple = ("grpo", "gspo", "reinforce_pp")
    variants: tuple = FOUR
    confirmatory: bool = False


DENSE = {"train.reward": "dense"}  # the family's partial credit for RL; the table stays exact match
# d1 masks 15 % of a long natural-language prompt; a tiny prompt carries its task in every
# character. Calibration on dev (docs/reproducing.md) kept it where the baseline moved with it
# (sudoku, math) and dropped it where it stalled RL (json: mean gradient norm 4.2 against 0.25).
NO_PROMPT_MASK = {"sml.p_mask_prompt": 0.0}
FIVE = {  # in the order their SFT is started: the longest first, so two workers finish together
    # SFT to 30 % dev (not 10 %): from 10 % the baseline of math and code moved less than their noise
    "code": Family("python_tiny", 10, sft_target=0.3, rl={**DENSE, **NO_PROMPT_MASK, "train.steps": 32}),
    "json": Family("json_tiny", 28, sft_target=0.3, rl={**DENSE, **NO_PROMPT_MASK, "train.steps": 32}),
    "countdown": Family("countdown_tiny", 12, rl={**DENSE, "train.steps": 60}),
    "math": Family("arithmetic_tiny", 4, sft_target=0.3, rl={**DENSE, "train.steps": 64}),
    "sudoku": Family("sudoku_tiny", 18, sft_eval_every=20, rl={**DENSE, "train.steps": 32}),
}
FULL = ("code", "json", "math", "sudoku")  # one family per area of the paper (countdown: tiny-confirm)
# tiny-full scores on more test prompts than the default's 256. Its baseline-vs-start rows are
# paired by prompt, and with 256 the prompt variance alone put json's MDE at 6.4 pp and code's at
# 4.1 (results/tiny-full, first run); the interval shrinks with the square root of the prompts,
# and an evaluation is 1-5 % of a cell (BENCHMARKS.md). arithmetic_tiny's test split holds 510.
FULL_EVAL = {"code": 768, "json": 1024, "math": 510, "sudoku": 512}


def full_family(label: str) -> Family:
    """FIVE's family with tiny-full's test-set size (its canvas and SFT start unchanged)."""
    return replace(FIVE[label], rl={**FIVE[label].rl, "train.n_eval": FULL_EVAL[label]})


# tiny-full, the confirmation of the four areas: the powered grid the exploratory runs led to
# (results/README.md: sudoku's variant rows are seed-bound, MDE 8.1 with 8 seeds and at most 5.7 by
# grid with 16, results/tiny-full-sudoku16; code's baseline moves past its MDE at 64 steps,
# results/tiny-full-code64), on seeds no committed table ran (0-15: tiny, tiny-confirm and the
# exploratory tiny-full; 16-23: tiny-bases; 100-103: the sweeps) and test prompts none scored:
# each family's draw with test seed 1 skips configs/scored/<task>.txt (scripts/scored_prompts.py).
# arithmetic_tiny's test split holds 510 prompts, every one scored before: math keeps them (fresh
# seeds only). About 115 min on 2 cores with AMX (bf16 rollouts); more without.
FRESH_SEEDS = tuple(range(24, 32))


def fresh_family(label: str, steps: int | None = None, seeds: tuple = ()) -> Family:
    """full_family with the confirmation's fresh test prompts (math: its whole split, none fresh)."""
    fam = full_family(label)
    fresh = {} if label == "math" else {"train.test_seed": 1, "train.test_exclude": f"configs/scored/{fam.task}.txt"}
    return replace(fam, rl={**fam.rl, **fresh, **({"train.steps": steps} if steps else {})}, seeds=seeds)


CONFIRMED = {
    "code": fresh_family("code", steps=64),
    "json": fresh_family("json"),
    "math": fresh_family("math"),
    "sudoku": fresh_family("sudoku", seeds=tuple(range(24, 40))),
}
FULL_NOTES = (
    "Fixed before any cell ran, from the exploratory runs results/tiny-full-exploratory, "
    "results/tiny-full-sudoku16 and results/tiny-full-code64 (chosen after looking at their test tables: "
    "the test-set sizes, 16 sudoku seeds, 64 code steps). Fresh: seeds 24-31 (sudoku 24-39) ran in no "
    "committed table; code, json and sudoku are scored on prompts no committed table scored. math: "
    "arithmetic_tiny's test split holds 510 prompts and every one was scored by the exploratory tiny-full, "
    "so math keeps them all (seed 0) and is fresh in its seeds only. sudoku clusters by solution grid: the "
    "4x4 universe's test grids were all seen before, so its fresh puzzles are new puzzles of seen grids. "
    "Decision: Holm-adjusted p < 0.05 within each family of comparisons; MDE (2.8 SE, clustered) reported."
)


# tiny-cache, the rollout cache and threshold decoding as an ablation axis: json_tiny has the longest
# canvas of the tiny families (28 tokens; the others 4-18), decoded here in 4 blocks of 7 (4 steps
# each) so that a prefix cache has committed blocks to reuse and a dual cache a masked suffix. Only
# the rollouts change between settings: every cell is scored by the same uncached evaluation on that
# canvas, so a setting's row says what its rollouts did to the trained policy.
SEMI_AR = {f"{s}.{k}": v for s in ("rollout", "eval") for k, v in (("block_length", 7), ("steps", 16))}
CACHE_FAMILY = replace(FIVE["json"], rl={**FIVE["json"].rl, **SEMI_AR})
ROLLOUT_SETTINGS = {
    f"{cache}{'' if th is None else f' th={th}'}": {"rollout.cache": cache, "rollout.threshold": th}
    for th in (None, 0.9)
    for cache in ("none", "prefix", "dual")
}


# tiny-block (issue 57), DACA on the tiny block-diffusion model: sudoku and json on the canvases and steps of
# their full-attention families (two tokens a step), cut into blocks: sudoku's 18 into 3 blocks of 6 (3 steps
# each: the only cut with more than one step per block), json's 28 into 7 of 4 (2 steps each: SDAR's and TraDo's
# block of 4). Exact block cache in rollouts and evaluation (identical to uncached decoding, tested), DPS
# normalised within each block (docs/method.md 12.5). Fresh: seeds 120-151 ran in no committed table (0-47 and
# 100-103 did; tiny-compute-starts registered 48-87); test prompts drawn with test seed 4 skipping every prompt a committed table or a confirmatory
# draw scored (configs/scored/<task>.after-compute.txt: tiny-full's and tiny-compute's draws included).
BLOCK_RL = {"rollout.cache": "block", "eval.cache": "block", "dps.scope": "block"}
BLOCK_FRESH = {"train.test_seed": 4}  # tiny-compute-starts draws with 3


def block_family(label: str, block: int, seeds: tuple, n_eval: int) -> Family:
    """FIVE's family as a block model: its canvas in blocks of BLOCK, tiny-block's fresh seeds and test prompts."""
    fam = FIVE[label]
    skip = {"train.test_exclude": f"configs/scored/{fam.task}.after-compute.txt", "train.n_eval": n_eval}
    return replace(fam, block=block, seeds=seeds, rl={**fam.rl, **BLOCK_RL, **BLOCK_FRESH, **skip})


BLOCK_FAMILIES = {
    "sudoku": block_family("sudoku", 6, tuple(range(120, 152)), 512),
    "json": block_family("json", 4, tuple(range(120, 136)), 1024),
}
BLOCK_NOTES = (
    "Fixed before any cell ran (issue 57). The tiny model with a block-causal mask (model.block_size; "
    "docs/method.md section 12), SFT'd with the block-diffusion objective to the families' dev targets, "
    "decoded block by block with the exact block cache; DPS normalised within each block (dps.scope=block); "
    "SML's strata drawn inside each block (causal, K = 4, clamped to sudoku's 3 steps per block and json's 2: "
    "the step-merged trace likelihood of each block). Question: does DACA's effect on the full-attention tiny "
    "model (results/tiny-full: sudoku +2.8 pp [+0.1, +5.6], json +0.3 [-1.8, +2.5]) survive the move to "
    "blocks? Beside it, the field's block method TraceRL (loss.base=tracerl, docs/method.md 12.8: baseline, +DPS; "
    "no +SML, it defines its likelihood) as its code runs (loss.beta 0, loss.trace_kl 0.01 to the old policy, no "
    "prompt mask); secondary: its baseline vs start and vs grpo +DACA, its +DPS vs its baseline. Power, projected "
    "by experiments/analysis/stats.projected_mde from tiny-full's variance "
    "components for +DACA vs baseline (the nearest estimate; a block model's may differ): sudoku 32 seeds x "
    "512 puzzles (69 grid clusters): MDE 2.8 pp (80 % power at the full-attention effect; 16 seeds: 3.9); "
    "json 16 seeds x 1,024 prompts: MDE 2.1 pp. Fresh: seeds 120-151 (sudoku) and 120-135 (json) ran in no "
    "committed table (tiny-compute-starts registered 48-87); test prompts drawn with test seed 4 skipping configs/scored/<task>.after-compute.txt "
    "(every prompt a committed table scored, and tiny-full's and tiny-compute's draws); sudoku's 4x4 "
    "universe has about 72 test grids, all seen before: its fresh puzzles are new puzzles of seen grids. "
    "Decision: Holm-adjusted p < 0.05 within each family of comparisons; MDE (2.8 SE, clustered) reported."
)


# the math family before arithmetic_tiny (2-3 operands: its SFT stalled near 6 %); the committed
# estimator study (docs/estimators.md) ran on it, so its canvas and SFT start stay findable
EARLIER = {"arithmetic": Family("arithmetic", 4)}


def family_of(task: str) -> Family | None:
    """The tiny family (canvas, SFT budget) of a task, or None."""
    return next((f for f in FIVE.values() if f.task == task), None) or EARLIER.get(task)


# The regime every tiny cell trains in (docs/reproducing.md, "The regime"): d1's shape at the
# lowest mu at which the importance ratio acts (the second inner update sees a moved policy),
# d1's prompt masking and KL, and PPO's / TRL's clip 0.2 (d1's 0.5 never clipped at these lrs).
REGIME = {"train.mu": 2, "sml.p_mask_prompt": 0.15, "loss.beta": 0.04, "loss.epsilon": 0.2}
TINY_RL = {**REGIME, "train.lr": 5e-5, "train.n_eval": 256, "train.test_seed": 0}
PAPER_TASKS = ("gsm8k", "math500", "humaneval", "mbpp", "sudoku", "countdown", "json_schema")
SELECTION_SEEDS = (100, 101)  # the readings sweep's seeds: never used by a confirmatory table
PICKS_FILE = "picks.json"  # in data_dir("readings"): results/tiny-readings in a checkout


def load_picks() -> dict:
    """What `tiny-readings` picked: the "picks" of its committed picks.json (variant -> keys)."""
    path = data_dir("readings") / PICKS_FILE
    try:
        return json.loads(path.read_text())["picks"]
    except (OSError, ValueError, KeyError) as exc:
        raise UnavailableError(
            f"{path}: the readings sweep's picks cannot be read ({exc}); "
            "restore results/tiny-readings/picks.json from the repository"
        ) from None


PICKS = load_picks()
CONFIRM = FOUR + ("+DPS-random",)
# The default: tiny-ablation's two primary arms on its first 7 seeds, scored on 1,024 test puzzles whose first 256
# are tiny-ablation's (the test draw is prefix-stable): the same cells but for the test set's size, so its table
# re-runs those rows of results/tiny-ablation (BENCHMARKS.md: why not the whole grid in 15 minutes).
DEFAULT_EVAL = 1024
DEFAULT_NOTES = (
    "Chosen after looking at results/tiny-ablation (the previous default: 5 variants x seeds 0-7 x 256 "
    "test puzzles) and at a first run of this design with 6 seeds and 256 puzzles on an AMD EPYC, its "
    "cells rescored on 1,024 puzzles (exploratory; BENCHMARKS.md): tiny-ablation's baseline and +DACA "
    "arms on seeds 0-6, scored on 1,024 puzzles whose first 256 are tiny-ablation's. A run re-runs "
    "those cells: a replication on the same seeds, not a fresh confirmation. Decision: Holm-adjusted "
    "p < 0.05 within each family."
)
PRESETS = {
    "tiny": TinyPreset(
        "the embedded default: grpo baseline and +DACA on sudoku x 7 seeds x 1,024 test puzzles in the "
        "d1-like regime with the readings tiny-readings picked (under 15 min on 2 cores; the full "
        "ablation: tiny-ablation)",
        {"sudoku": FIVE["sudoku"]},
        rl_steps=32,
        seeds=tuple(range(7)),
        rl={**TINY_RL, "train.n_eval": DEFAULT_EVAL},
        variants=("baseline", "+DACA"),
        picks=PICKS,
        confirmatory=True,
        notes=DEFAULT_NOTES,
        exploratory="reproduces results/tiny; chosen after looking at these seeds",
    ),
    "tiny-ablation": TinyPreset(
        "the ablation on the default's regime (results/tiny-ablation): grpo x {baseline, +DPS, "
        "+SML, +DACA, +DPS-random} x sudoku x 8 seeds (about 30 min on 2 cores without AMX)",
        {"sudoku": FIVE["sudoku"]},
        rl_steps=32,
        seeds=tuple(range(8)),
        rl=TINY_RL,
        variants=CONFIRM,
        picks=PICKS,
        confirmatory=True,
    ),
    "tiny-confirm": TinyPreset(
        "sudoku and countdown in one table (tiny-ablation's cells plus countdown's)",
        {"sudoku": FIVE["sudoku"], "countdown": FIVE["countdown"]},
        rl_steps=32,
        seeds=tuple(range(8)),
        rl=TINY_RL,
        variants=CONFIRM,
        picks=PICKS,
        confirmatory=True,
    ),
    "tiny-readings": TinyPreset(
        "the readings sweep: every DPS / SML reading and the random control at 2 lrs, "
        "selection seeds 100-101, scored on the dev split; writes picks.json",
        {"sudoku": FIVE["sudoku"]},
        rl_steps=32,
        seeds=SELECTION_SEEDS,
        rl={**TINY_RL, "train.eval_split": "dev"},
        readings=tuple(READINGS),
        lrs=(5e-5, 1e-4),
    ),
    "tiny-quick": TinyPreset(
        "a first look: tiny-ablation's variants x sudoku x 2 seeds (exploratory)",
        {"sudoku": FIVE["sudoku"]},
        rl_steps=32,
        seeds=(0, 1),
        rl=TINY_RL,
        variants=CONFIRM,
        picks=PICKS,
    ),
    "tiny-full": TinyPreset(
        "the four areas confirmed: grpo x 4 variants x {code, json, math, sudoku}, sudoku x 16 "
        "seeds, code x 64 steps, on fresh seeds and test prompts, its design committed first "
        "(about 115 min on 2 cores with AMX; --executor ray on more)",
        CONFIRMED,
        rl_steps=32,
        seeds=FRESH_SEEDS,
        rl=TINY_RL,
        picks=PICKS,
        confirmatory=True,
        design="results/tiny-full/design.json",
        notes=FULL_NOTES,
    ),
    "tiny-full-exploratory": TinyPreset(
        "the exploratory four-area run (results/tiny-full-exploratory): 8 seeds, 32 "
        "steps, the seed-0 test sets (about 90 min on 2 cores with AMX)",
        {f: full_family(f) for f in FULL},
        rl_steps=32,
        seeds=tuple(range(8)),
        rl=TINY_RL,
        picks=PICKS,
    ),
    "tiny-bases": TinyPreset(
        "DACA on every base and against the field's methods: 8 bases x the variants each "
        "admits + grpo's baseline at +DACA's compute, sudoku x 8 seeds, after a per-base lr "
        "sweep on dev (about 2.5 h on 2 cores; --bases runs some)",
        {"sudoku": FIVE["sudoku"]},
        rl_steps=TINY_BASES_DESIGN["steps"],
        seeds=tuple(TINY_BASES_DESIGN["confirmatory_seeds"]),
        bases=PAPER_BASES + FIELD_BASES,
        rl=TINY_RL,
        picks=PICKS,
        confirmatory=True,
        arms="bases",
        selection={k: TINY_BASES_DESIGN[k] for k in ("selection_seeds", "selection_split", "lr_grid", "tuned")},
    ),
    "tiny-cache": TinyPreset(
        "the rollout cache x threshold axis: grpo x {baseline, +DACA} x rollouts with cache "
        "none / prefix / dual, threshold off / 0.9, json_tiny in 4 blocks of 7, 4 seeds "
        "(exploratory; about 50 min on 2 cores)",
        {"json": CACHE_FAMILY},
        rl_steps=32,
        seeds=(0, 1, 2, 3),
        rl=TINY_RL,
        variants=("baseline", "+DACA"),
        picks=PICKS,
        settings=ROLLOUT_SETTINGS,
    ),
    "tiny-compute": TinyPreset(
        "is DACA's credit worth its compute: grpo baseline and +DACA at 32 steps and at the "
        f"baseline's steps at +DACA@32's FLOPs ({compute_grid.MATCHED_STEPS}), 2 SFT starts x 8 "
        "fresh seeds, sudoku on fresh prompts, its design committed first (about 75 min on 2 "
        "cores)",
        {"sudoku": replace(FIVE["sudoku"], rl={**FIVE["sudoku"].rl, **compute_grid.TEST})},
        rl_steps=compute_grid.MATCHED_STEPS,
        seeds=compute_grid.SEEDS,
        rl=TINY_RL,
        variants=("baseline", "+DACA"),
        picks=PICKS,
        confirmatory=True,
        arms="compute",
        sft_seeds=compute_grid.SFT_SEEDS,
        design="results/tiny-compute/design.json",
        notes=compute_grid.NOTES,
    ),
    "tiny-block": TinyPreset(
        "DACA on the tiny block-diffusion model: grpo x 4 variants and the field's block method (TraceRL: "
        "baseline, +DPS) x {sudoku in blocks of 6 x 32 seeds, json in blocks of 4 x 16 seeds}, fresh seeds and "
        "test prompts, its design committed first (about 2.8 h on 2 cores)",
        BLOCK_FAMILIES,
        rl_steps=32,
        seeds=tuple(range(48, 64)),
        bases=("grpo", "tracerl"),
        base_variants={"tracerl": ("baseline", "+DPS")},
        base_keys=BLOCK_FIELD_KEYS,
        rl=TINY_RL,
        picks=PICKS,
        confirmatory=True,
        design="results/tiny-block/design.json",
        notes=BLOCK_NOTES,
    ),
    "tiny-compute-starts": TinyPreset(
        "the compute question over SFT starts: grpo baseline to 80 steps and +DACA to 32 (+DACA@32 spends baseline@80's "
        f"FLOPs), {len(compute_grid.STARTS_SFT_SEEDS)} fresh SFT starts x {compute_grid.SEEDS_PER_START} fresh seeds "
        "each, sudoku on fresh prompts, eval every 16 steps, its design and power analysis committed first (about "
        "100 min on 2 cores)",
        {"sudoku": replace(FIVE["sudoku"], rl={**FIVE["sudoku"].rl, **compute_grid.STARTS_TEST})},
        rl_steps=compute_grid.MATCHED_STEPS,
        seeds=compute_grid.STARTS_SEEDS,
        rl=TINY_RL,
        variants=("baseline", "+DACA"),
        picks=PICKS,
        confirmatory=True,
        arms="compute-starts",
        sft_seeds=compute_grid.STARTS_SFT_SEEDS,
        design="results/tiny-compute-starts/design.json",
        notes=compute_grid.STARTS_NOTES,
    ),
    **{
        f"llada-{t.replace('_', '-')}": PaperPreset(
            f"LLaDA-8B-Instruct on {t}, 3 base methods x 4 variants (d1 protocol)", (f"configs/paper/llada_{t}.yaml",)
        )
        for t in PAPER_TASKS
    },
    "paper": PaperPreset(
        "every paper-scale task: LLaDA-8B-Instruct, 3 base methods x 4 variants",
        tuple(f"configs/paper/llada_{t}.yaml" for t in PAPER_TASKS),
    ),
}


def comparisons(preset: TinyPreset) -> dict:
    """The preset's planned comparisons, per family label: primary = +DACA vs baseline and baseline
    vs the RL start (`start`); secondary = every other variant vs baseline (the control included).
    Anything else a table prints is exploratory. Rows as design.json holds them:
    {"family", "task", "variant", "vs"} (variant minus vs). A per-base preset (`arms="bases"`) plans
    bases_grid.planned_comparisons: primary = each base's DACA row vs its baseline, secondary = the rest."""
    if preset.arms in ("bases", "compute", "compute-starts"):
        plan = {
            "bases": lambda label, fam: planned_comparisons(label, fam.task, preset.bases),
            "compute": lambda label, fam: compute_grid.planned_comparisons(label, fam.task, preset.rl_steps),
            "compute-starts": lambda label, fam: compute_grid.starts_comparisons(label, fam.task, preset.rl_steps),
        }
        per = [plan[preset.arms](label, fam) for label, fam in preset.families.items()]
        return {k: [c for p in per for c in p[k]] for k in ("primary", "secondary")}
    primary, secondary = [], []
    for label, fam in preset.families.items():
        row = lambda a, b: {"family": label, "task": fam.task, "variant": a, "vs": b}  # noqa: E731
        if "baseline" in preset.variants:
            primary.append(row("baseline", "start"))
            if "+DACA" in preset.variants:
                primary.append(row("+DACA", "baseline"))
            secondary += [row(v, "baseline") for v in preset.variants if v not in ("baseline", "+DACA")]
    rows = {"primary": primary, "secondary": secondary}
    return field_rows(primary, secondary, preset) if preset.base_variants else rows  # + comparator bases
