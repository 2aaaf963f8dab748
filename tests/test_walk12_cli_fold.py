"""The command line's own errors fold between words at an 80-column terminal (issue 45, the
twelfth walk's 6): `stepdbg python` said `... or stepdbg pyth` / `on -m MODULE`, a missing
runtime dir `No such f` / `ile or directory`, a bad spec `known: nan, i` / `nf, ...`, a
missing bundle `(a directory with meta` / `.json ...`: the terminal broke them mid-word. A
spec a letter off says what was meant. A real terminal: tmux at 80 columns (its capture
joins what the terminal wrapped, so a line over 80 columns is one the terminal broke)."""

from __future__ import annotations

import shutil

import pytest
from conftest import Tmux
from test_walk11_fold_relay import WIDTH, broken

pytestmark = pytest.mark.timeout(300)

RUNS = ("python; "
        "$PY -m stepdbg --break 'gradnorm>5' python x.py; "
        "$PY -m stepdbg replay /nonexistent/bundle; "
        "STEPDBG_RUNTIME_DIR=/nonexistent/runtime $PY -m stepdbg --no-tui $PY demos/nan_log.py --steps 1; "
        "echo ALL-DONE")


def folded(tmp_path, runtime_dir, runs: str) -> tuple[str, str]:
    """`stepdbg RUNS` (ending `echo ALL-DONE`) in tmux at WIDTH columns: the screen, checked that
    no line of more than one word was broken by the terminal, and its words joined."""
    if shutil.which("tmux") is None:
        pytest.skip("needs tmux")
    term = Tmux(tmp_path, runtime_dir, runs, size=(WIDTH, 40))
    try:
        screen = term.wait_screen("ALL-DONE")
    finally:
        term.close()
    assert not broken(screen.splitlines()), screen
    return screen, " ".join(ln.strip() for ln in screen.splitlines())


def test_the_command_lines_errors_fold_between_words(tmp_path, private_runtime_dir):
    import sys

    screen, said = folded(tmp_path, private_runtime_dir, RUNS.replace("$PY", sys.executable))
    for words in ("stepdbg: no script after python", "unknown condition 'gradnorm' (did you mean grad_norm?)",
                  "is not an evidence bundle (a directory with meta.json and tensors.pt",
                  "cannot listen on a socket in STEPDBG_RUNTIME_DIR=/nonexistent/runtime: No such file or directory",
                  "the job runs without attach"):
        assert words in said, screen
