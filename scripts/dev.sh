#!/usr/bin/env bash
# Set up a virtual environment and run the demo or the tests.
#   bash scripts/dev.sh demo    # the NaN demo in the TUI, paused at the break (r replays the step)
#   bash scripts/dev.sh test    # ruff, the import contracts and the whole test suite
#   bash scripts/dev.sh test --quick   # the same without the tests marked slow: the edit-test loop
# Tests run in parallel (pytest-xdist): STEPDBG_TEST_WORKERS=N sets how many (default 4;
# most tests wait on subprocesses, not on the CPU). Any further arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV_HINT="on Debian or Ubuntu: apt-get install python3-venv"
if [ -e .venv/bin/python ] || [ -L .venv/bin/python ]; then
  # (a venv whose Python was upgraded or removed: 'python -m venv' keeps its dangling links)
  if ! .venv/bin/python -c "" 2>/dev/null; then
    echo "dev.sh: .venv/bin/python does not run (the Python it was made from moved or is gone?): rm -r .venv, then run this again" >&2
    exit 1
  fi
elif ! "$PY" -m venv .venv; then
  rm -rf .venv  # (half made: Debian's python3 without python3-venv leaves a venv with no pip)
  echo "dev.sh: '$PY -m venv .venv' failed ($VENV_HINT), then run this again" >&2
  exit 1
fi
if ! .venv/bin/python -m pip --version >/dev/null 2>&1 && ! .venv/bin/python -m ensurepip --upgrade >/dev/null 2>&1; then
  echo "dev.sh: .venv has no pip and ensurepip cannot add it ($VENV_HINT; or rm -r .venv)" >&2
  exit 1
fi
# torch first, pinned: a bare 'torch' requirement with no torch installed pulls the CUDA build.
# On Linux PyPI's torch IS the CUDA build (GBs of nvidia packages): with no NVIDIA GPU here
# the CPU build comes from PyTorch's own index (its 2.13.0+cpu sorts above PyPI's 2.13.0),
# where that index answers (offline, pip's pip.conf may name a local wheel instead).
# TORCH_INDEX names another index (a CUDA one: https://download.pytorch.org/whl/cu128).
CPU_INDEX=https://download.pytorch.org/whl/cpu
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  index=()
  if [ -n "${TORCH_INDEX:-}" ]; then
    case "$TORCH_INDEX" in  # (pip ignores a URL with no scheme with a warning, and takes PyPI's: the CUDA build)
      *://*) index=(--extra-index-url "$TORCH_INDEX") ;;
      *) echo "dev.sh: TORCH_INDEX='$TORCH_INDEX' is not an index's URL (as https://download.pytorch.org/whl/cu128)" >&2
         exit 1 ;;
    esac
  elif [ "$(uname -s)" = Linux ] && ! command -v nvidia-smi >/dev/null && .venv/bin/python -c \
      "import urllib.request as u; u.urlopen('$CPU_INDEX/torch/', timeout=15)" 2>/dev/null; then
    index=(--extra-index-url "$CPU_INDEX")
  fi
  .venv/bin/python -m pip install --quiet "torch==${TORCH_VERSION:-2.13.0}" ${index[@]+"${index[@]}"}
fi
# The demo needs stepdbg alone; the tests also the ecosystem they run against (transformers,
# lightning, accelerate: the [test] extra).
if [ "${1:-}" = test ]; then
  .venv/bin/python -m pip install --quiet -e ".[test]"
else
  .venv/bin/python -m pip install --quiet -e .
fi

case "${1:-}" in
  demo)
    exec .venv/bin/stepdbg --break nan .venv/bin/python demos/nan_log.py ;;
  test)
    # The remote-attach tests start a real sshd and the terminal tests a real tmux (Debian
    # packages); without them those tests skip.
    if { [ ! -x /usr/sbin/sshd ] || ! command -v tmux >/dev/null; } && command -v apt-get >/dev/null; then
      SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
      if $SUDO true 2>/dev/null; then
        $SUDO apt-get update -qq >/dev/null && \
          DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openssh-server openssh-client tmux >/dev/null
      else
        echo "note: openssh-server/tmux missing and not installable here: those tests will skip" >&2
      fi
    fi
    .venv/bin/ruff check .
    .venv/bin/lint-imports --no-cache
    shift
    tier=()
    if [ "${1:-}" = "--quick" ]; then
      shift
      tier=(-m "not slow and not cuda")
    fi
    exec .venv/bin/python -m pytest -q -n "${STEPDBG_TEST_WORKERS:-4}" --durations=25 ${tier[@]+"${tier[@]}"} "$@" ;;
  *)
    echo "usage: bash scripts/dev.sh demo | test [--quick] [pytest args]" >&2
    exit 2 ;;
esac
