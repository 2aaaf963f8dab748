"""`info model` at an 80-column console keeps one line per module (issue 45, the closing
walk's 4): its fixed-width columns made a line of 86 columns the terminal broke apart
(`head.0  Linear  out=[64, 32] params=288 |w|=4.3` / `|g|=- train`). The columns are as
narrow as what they hold, then mode, out and params are left out (as the TUI's Model panel
does), said in a last line. A real terminal (tmux at 80 columns: its capture joins what the
terminal wrapped); failed before the fix."""

from __future__ import annotations

import shutil
import sys

import pytest
from conftest import Tmux

from stepdbg.client.info_text import model_lines

pytestmark = pytest.mark.timeout(300)

WIDTH = 80
MODULES = ["(root)", "features", "head", "head.0", "head.1", "head.2"]


def test_info_model_at_an_80_column_console_is_one_line_per_module(tmp_path, private_runtime_dir):
    if shutil.which("tmux") is None:
        pytest.skip("needs tmux")
    term = Tmux(tmp_path, private_runtime_dir,
                f"--no-tui --break nan --on-break pause {sys.executable} demos/nan_log.py", size=(WIDTH, 40))
    try:
        term.wait_screen("(stepdbg) ")
        term.keys("info model", "Enter")
        lines = term.wait_screen("  head.2").splitlines()
        at = next(i for i, ln in enumerate(lines) if ln.startswith("(stepdbg) info model"))
        shown = lines[at + 1:at + 1 + len(MODULES)]
        assert [ln.split()[0] for ln in shown] == MODULES, "\n".join(lines[at:])
        assert all(len(ln) <= WIDTH and "|w|=" in ln and "|g|=" in ln for ln in shown), "\n".join(lines[at:])
        term.keys("q", "Enter")
    finally:
        term.close()


def test_model_lines_as_they_were_where_they_fit_and_with_no_terminal():
    rows = [{"depth": d, "name": n, "type": "Linear", "output_shape": [64, 32], "params": 288,
             "weight_norm": 4.3, "grad_norm": None, "training": True} for d, n in ((0, "(root)"), (2, "head.0"))]
    wide = model_lines(rows)
    assert wide[1] == "    head.0                   Linear           out=[64, 32] params=288 |w|=4.3 |g|=- train"
    assert model_lines(rows, 200) == wide
    assert model_lines(rows, 62) == ["(root)     Linear out=[64, 32] params=288 |w|=4.3 |g|=- train",
                                     "    head.0 Linear out=[64, 32] params=288 |w|=4.3 |g|=- train"]
    assert model_lines(rows, 40)[-1] == "(left out at 40 columns: mode, out, params)"


def test_info_model_after_n_with_a_nan_gradient_shows_the_table(tmp_path, private_runtime_dir):
    """The sixteenth walk's 1: the README's demo, `n` (the backward ran: its gradients are
    NaN), then `info model` said `error: Unknown format code 'g' for object of type 'str'`:
    a non-finite norm comes as its word. The console's real output, in tmux."""
    if shutil.which("tmux") is None:
        pytest.skip("needs tmux")
    term = Tmux(tmp_path, private_runtime_dir,
                f"--no-tui --on-break pause {sys.executable} demos/nan_log.py", size=(120, 40))
    try:
        term.wait_screen("(stepdbg) ")
        term.keys("n", "Enter")
        term.wait_screen("(after_backward) [pause]")
        term.keys("info model", "Enter")
        shown = term.wait_screen("  head.2")
        assert "Unknown format code" not in shown and "error:" not in shown, shown
        assert "|g|=nan" in shown, shown
        term.keys("q", "Enter")
    finally:
        term.close()
