"""The command line's own errors fold between words at an 80-column terminal (issue 45, the
twelfth walk's 6): `stepdbg python` said `... or stepdbg pyth` / `on -m MODULE`, a missing
runtime dir `No such f` / `ile or directory`, a bad spec `known: nan, i` / `nf, ...`, a
missing bundle `(a directory with meta` / `.json ...`: the terminal broke them mid-word. A
spec a letter off says what was meant. A real terminal: tmux at 80 columns (its capture
joins what the terminal wrapped, so a line over 80 columns is one the terminal broke)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

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


def test_a_long_interpreter_path_goes_whole_to_its_own_line(tmp_path, private_runtime_dir):
    """`stepdbg python` where the PATH's python has no torch names stepdbg's own interpreter;
    CI's checkout is deeper than ours and the terminal broke that line before the path (a
    print, not say). stepdbg here runs from a venv at a 60-character path, the PATH's
    `python` the base interpreter (no torch)."""
    import sys

    base = os.path.realpath(sys._base_executable)
    deep = tmp_path / ("a-venv-folder-at-a-depth-a-ci-checkout-has-" + "x" * 20)
    (deep / "bin").mkdir(parents=True)
    os.symlink(base, deep / "bin" / "python")
    shutil.copy(Path(sys.prefix) / "pyvenv.cfg", deep / "pyvenv.cfg")
    site = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    (deep / "lib").mkdir()
    os.symlink(site, deep / "lib" / site.name)
    bare = tmp_path / "bare"
    bare.mkdir()
    os.symlink(base, bare / "python")
    screen, said = folded(tmp_path, private_runtime_dir,
                          f"--help > /dev/null; PATH={bare}:$PATH {deep}/bin/python -m stepdbg --no-tui python "
                          "demos/nan_log.py --steps 1; echo ALL-DONE")
    assert f"the script runs under stepdbg's own interpreter: {deep}/bin/python" in said, screen
    assert "step 0 loss" in said, screen
