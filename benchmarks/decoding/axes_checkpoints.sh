#!/usr/bin/env bash
# Two RL checkpoints (a baseline and a +DACA cell's final/) under the same decodings and prompt templates, and the
# checkpoint x decoding x template table and figure with intervals (docs/evaluation.md, "Checkpoints compared
# decode by decode"):
#   bash benchmarks/decoding/axes_checkpoints.sh BASELINE_CKPT DACA_CKPT TASK [OUT]
#   N=256 DECODES=protocol,reference,threshold TEMPLATES=chat,plain PROTOCOL=d1 BATCH=32 SEED=0 (defaults)
#   PYTHON=.venv/bin/python to pick the interpreter; more `daca-bench eval` options after OUT go to both evals.
# OUT (default runs/axes-TASK) gets baseline/ and +DACA/ (each an `eval --decode --templates` folder, resumable),
# decodes.md / decodes.csv (`daca-bench table`) and decodes.png / .pdf (`daca-bench plot`).
# `chat` is dropped for both, with a note, where either checkpoint's tokenizer has no chat template (the tiny
# families have none): `eval` would refuse it in one line.
set -euo pipefail
if [ $# -lt 3 ]; then
    sed -n '2,11p' "$0" >&2
    exit 2
fi
BASELINE=$1 DACA=$2 TASK=$3
OUT=${4:-runs/axes-$TASK}
shift $(($# < 4 ? $# : 4))
cd "$(dirname "$0")/../.."
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} HF_DATASETS_OFFLINE=${HF_DATASETS_OFFLINE:-1} TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python}
N=${N:-256} DECODES=${DECODES:-protocol,reference,threshold} TEMPLATES=${TEMPLATES:-chat,plain}
PROTOCOL=${PROTOCOL:-d1} BATCH=${BATCH:-32} SEED=${SEED:-0}

has_chat() {  # prints yes / no / unknown: whether the checkpoint's tokenizer has a chat template
    "$PY" - "$1" <<'EOF'
import sys
from pathlib import Path

folder = Path(sys.argv[1])
if sys.argv[1] == "tiny":
    print("no")
    raise SystemExit
for where in (folder, folder.parent):  # a checkpoint-STEP/ (dcp) keeps no tokenizer; its run's final/ may
    if (where / "tokenizer_config.json").is_file() or (where / "chat_template.jinja").is_file():
        from daca_bench.models import load_tokenizer

        try:
            print("yes" if getattr(load_tokenizer(str(where)), "chat_template", None) else "no")
        except Exception:  # noqa: BLE001 - eval will say what is wrong with the folder
            print("unknown")
        raise SystemExit
print("unknown")
EOF
}

if [[ ",$TEMPLATES," == *",chat,"* ]]; then
    for ckpt in "$BASELINE" "$DACA"; do
        if [ "$(has_chat "$ckpt")" = no ]; then
            kept=$(echo ",$TEMPLATES," | sed 's/,chat,/,/; s/^,//; s/,$//')
            echo "note: $ckpt's tokenizer has no chat template: --templates ${kept:-plain} for both checkpoints (chat dropped)" >&2
            TEMPLATES=${kept:-plain}
            break
        fi
    done
fi

mkdir -p "$OUT"
for pair in "baseline=$BASELINE" "+DACA=$DACA"; do
    label=${pair%%=*} ckpt=${pair#*=}
    echo "== $label: $ckpt, $TASK, --protocol $PROTOCOL --decode $DECODES --templates $TEMPLATES --n $N" >&2
    "$PY" -m daca_bench eval --model "$ckpt" --task "$TASK" --protocol "$PROTOCOL" --decode "$DECODES" \
        --templates "$TEMPLATES" --n "$N" --batch-size "$BATCH" --seed "$SEED" --output-dir "$OUT/$label" "$@"
done
"$PY" -m daca_bench table "$OUT/baseline" "$OUT/+DACA" --output-dir "$OUT"
"$PY" -m daca_bench plot "$OUT/baseline" "$OUT/+DACA" --output-dir "$OUT"
