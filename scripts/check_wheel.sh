#!/usr/bin/env bash
# The wheel alone runs the eval. Builds rag-position's wheel, checks that the data files and
# their licences are in it, installs it with the embedded models (scripts/setup.sh --wheel)
# into a new virtualenv outside any repository, and runs
#   rag-position eval multidoc --questions 2 --docs 10
# from an empty folder with an empty HOME (no caches, no $RAG_POSITION_* variables).
# Fails unless that exits 0 and writes its report. CI runs it (.ci/run).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/rag-position-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

python3 -m pip --disable-pip-version-check -q wheel --no-deps -w "$work/dist" "$repo"
wheel=$(ls "$work"/dist/rag_position-*.whl)
python3 - "$wheel" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = [f"rag_position/data/files/{n}" for n in (
    "nq-open-oracle-dev.jsonl.gz", "kv-retrieval-75_keys.jsonl.gz",
    "kv-retrieval-140_keys.jsonl.gz", "nq-open-oracle-dev.distractors-k30.json.gz",
    "reference-embedded-200.json", "README.md", "LICENSE-lost-in-the-middle")]
missing = [n for n in need if n not in names]
assert not missing, f"the wheel lacks {missing}"
print(f"wheel: {sys.argv[1].rsplit('/', 1)[-1]}, {len(names)} files, data and licences in it")
PY

VENV="$work/venv" bash "$repo/scripts/setup.sh" --wheel "$wheel"
mkdir "$work/empty" "$work/home"
cd "$work/empty"
env -u RAG_POSITION_DATA -u RAG_POSITION_CACHE -u XDG_CACHE_HOME -u HF_HOME \
  HOME="$work/home" "$work/venv/bin/rag-position" eval multidoc --questions 2 --docs 10 \
  --no-progress
test -s runs/multidoc/report.md
test -z "$(find "$work/venv" -name '*.egg-link' -o -name '__editable__*')"  # the wheel, not the repo
echo "check_wheel: the wheel alone ran the eval (report: runs/multidoc/report.md)"
