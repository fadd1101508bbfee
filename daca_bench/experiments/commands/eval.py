"""`daca-bench eval`: a checkpoint on a task at one or more generation lengths, under one or more protocols.

    daca-bench eval --model GSAI-ML/LLaDA-8B-Instruct --trust-remote-code --dtype bfloat16 \\
        --task gsm8k --gen-length 128 256 512 --output-dir runs/eval-llada-gsm8k
    daca-bench eval --model ... --task gsm8k --protocol d1,llada,dare     # side by side
    torchrun --nproc_per_node 8 -m daca_bench eval ...                    # rank r decodes rows r::8

`--protocol`: d1 (the default; each task posed as it declares d1), llada, dare or justgrpo (daca_bench/eval/protocols.py,
docs/evaluation.md). Argument parsing only: daca_bench/eval/runner.py `run_eval` evaluates and writes OUTPUT.
"""

from __future__ import annotations

from ...eval import axes, protocols
from ...eval.records import default_output
from ...eval.runner import run_eval


def configure(parser) -> None:
    parser.add_argument(
        "--model", default="tiny", help="tiny | a save_pretrained folder | a hub id | a LoRA adapter folder"
    )
    parser.add_argument("--base", default="", help="base model of a LoRA adapter folder that does not name one")
    parser.add_argument("--task", required=True, help="a registered task (see `daca-bench tasks`)")
    parser.add_argument(
        "--protocol",
        default="d1",
        help="d1 | llada | dare | justgrpo, or several side by side (d1,llada); docs/evaluation.md",
    )
    parser.add_argument("--split", default="test")
    parser.add_argument(
        "--n",
        "--samples",
        dest="n",
        type=int,
        default=None,
        help="samples (default: the whole split); under torchrun write --samples (torchrun "
        "takes --n for an abbreviation of its own options)",
    )
    parser.add_argument(
        "--gen-length",
        type=int,
        nargs="+",
        default=None,
        help="one or more canvas lengths (default: the protocol's; d1: the canvas of the run that "
        "trained --model, else 128)",
    )
    parser.add_argument(
        "--block-length", type=int, default=None, help="default: the protocol's (d1: that run's, else 32)"
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="denoising steps (default: the protocol's; d1: length / 2)"
    )
    parser.add_argument(
        "--threshold", type=float, default=None, help="parallel decoding above this confidence (protocols d1, dare)"
    )
    parser.add_argument(
        "--cache",
        default=None,
        choices=("none", "prefix", "dual"),
        help="KV cache within a block (sampler.cache; docs/method.md section 3.1); default: the "
        "protocol's (dare: prefix, else none)",
    )
    parser.add_argument("--batch-size", type=int, default=32, help="prompts decoded together (per process)")
    parser.add_argument(
        "--chat-template",
        choices=("auto", "on", "off"),
        default="auto",
        help="wrap prompts as a user message (auto: when the tokenizer has a template)",
    )
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the task's sample selection and of sampled decoding (each prompt's noise from (seed, its id): "
        "the same rows at any --batch-size and under torchrun)",
    )
    parser.add_argument("--output-dir", default=None, help="default: runs/eval-<task>-<model>")
    parser.add_argument("--fresh", action="store_true", help="drop the rows already in the output folder")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--decode",
        default=None,
        help=f"evaluate under several decodings, a grid with intervals: {', '.join(axes.DECODES)} "
        "(eval/axes.py; docs/evaluation.md)",
    )
    parser.add_argument(
        "--templates",
        default=None,
        help=f"and under several prompt templates: {', '.join(axes.TEMPLATES)} (default: as --chat-template)",
    )


def run(args) -> int:
    if args.decode or args.templates:
        decodes = axes.parse(args.decode or "protocol", axes.DECODES, "--decode")
        templates = axes.parse(
            args.templates or ("plain" if args.chat_template == "off" else "chat"), axes.TEMPLATES, "--templates"
        )
        out = args.output_dir or str(default_output(args.task, args.model)) + "-axes"
        axes.run_axes(
            args.model,
            args.task,
            protocols.parse(args.protocol),
            decodes,
            templates,
            output_dir=out,
            gen_lengths=args.gen_length,
            base=args.base,
            split=args.split,
            n=args.n,
            block_length=args.block_length,
            batch_size=args.batch_size,
            trust_remote_code=args.trust_remote_code,
            dtype=args.dtype,
            seed=args.seed,
            fresh=args.fresh,
            progress=not args.no_progress,
        )
        return 0
    run_eval(
        args.model,
        args.task,
        protocols.parse(args.protocol),
        base=args.base,
        split=args.split,
        n=args.n,
        gen_lengths=args.gen_length,
        block_length=args.block_length,
        steps=args.steps,
        threshold=args.threshold,
        cache=args.cache,
        batch_size=args.batch_size,
        chat_template=args.chat_template,
        trust_remote_code=args.trust_remote_code,
        dtype=args.dtype,
        seed=args.seed,
        output_dir=args.output_dir,
        fresh=args.fresh,
        progress=not args.no_progress,
    )
    return 0
