#!/usr/bin/env bash
# A small fixed run of every eval task (float32, 2 questions each, short answers),
# used to show that a refactor leaves every prediction unchanged:
#   bash scripts/snapshot_run.sh OUT_DIR && python scripts/snapshot_predictions.py OUT_DIR > snap.json
# Compare two snapshots with `diff`.
set -euo pipefail
out=${1:?usage: snapshot_run.sh OUT_DIR}
rp=${RP:-.venv/bin/rag-position}
common=(--dtype float32 --questions 2 --max-new-tokens 16 --no-progress --seed 0)
run() { local task=$1; shift; [ -e "$out/$task/report.md" ] && { echo "== $task: done before" >&2; return; }; echo "== $task $*" >&2; "$rp" eval "$task" "${common[@]}" --out "$out/$task" "$@" >"$out/$task.log" 2>&1 || { cat "$out/$task.log" >&2; exit 1; }; }
mkdir -p "$out"
run multidoc --docs 10 --positions 0,9
run compare --docs 10 --gold random,worst
run kv --pairs 75 --positions 0,74 --query-aware both
run gauge --docs 10 --positions 0,9
run open-domain --ks 5,10
run swim --budget 1000 --depths 0,100 --sizes 50
run multifact --tokens 1000 --keys 2 --iterations 2
run length --filler-tokens 400 --summed 1
run voting --docs 10 --votes 3
run quick
