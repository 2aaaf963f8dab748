#!/usr/bin/env bash
# The GPU checks, for a session lent a GPU machine (the `device` tool), in two halves:
#
#   bash scripts/gpu.sh wheels   # here, once: the pure-Python wheels the GPU machine lacks, into .whl/
#   bash scripts/gpu.sh run      # there (device run, carry [".whl"]): pytest -m cuda, then the benchmarks
#
# The GPU machine's Python has torch, pytest, rich, lightning and transformers, not
# textual, prompt-toolkit, torchinfo or the test plugins: those travel as wheels. `run`
# writes under $OUT (or ./gpu-out): cuda-tests.log, benchmarks.log, results-cuda.json and
# nvidia-smi.txt, for docs/performance.md's tables and the issue's note.
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS=(textual==8.2.8 mdit-py-plugins==0.7.0 platformdirs==4.14.7 prompt-toolkit==3.0.53 wcwidth==0.9.4
        torchinfo==1.8.0 textual-plotext==1.0.1 plotext==5.3.2)

case "${1:-}" in
wheels)
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any -d .whl "${WHEELS[@]}"
    ls .whl
    ;;
run)
    out="${OUT:-gpu-out}"
    mkdir -p "$out"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
    nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
    python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else \"no GPU\")" | tee "$out/versions.txt"
    rc=0
    timeout 240 python3 -m pytest -m cuda -v -p no:cacheprovider -p no:asyncio -o addopts="" tests/test_cuda.py tests/test_cuda_step.py tests/test_cuda_diff.py \
        2>&1 | tee "$out/cuda-tests.log" || rc=1
    timeout 200 python3 -m benchmarks --device cuda --json "$out/results-cuda.json" 2>&1 | tee "$out/benchmarks.log" || rc=1
    exit $rc
    ;;
*)
    sed -n 2,10p "$0"
    exit 2
    ;;
esac
