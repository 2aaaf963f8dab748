"""The tenth newcomer walk's 4 (issue 45): `stepdbg python demos/nan_log.py` in a terminal
of 80x24, `c` at the break to the job's end (the header: `job ended, exit code 0`), then
Ctrl+R: its toast said `... ended with exit code 0: nothing to reconnect to`, but the
header's words became `connection lost: job (pid N) gone`, for good. The header keeps the
job's exit code."""

from __future__ import annotations

import sys

from conftest import ROOT, Tmux
from test_tui_fixes import real

NAN = ROOT / "demos" / "nan_log.py"


@real
def test_ctrl_r_after_the_end_keeps_the_exit_code_in_the_header(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"{sys.executable} {NAN}", size=(80, 24))
    try:
        term.wait_screen("PAUSED [nan]")
        term.keys("c")
        term.wait_screen("job ended, exit code 0")
        term.keys("C-r")
        # (said under the REPL line since 9980f98, and in a toast: its words fold where the pid's digits put them)
        shown = term.wait_screen("reconnect to")  # (said, not tried, since the closing walk's 11)
        said = " ".join(ln.rsplit("▌", 1)[-1].strip() for ln in shown.splitlines())
        assert "nothing to reconnect to" in said, shown
        header = shown.splitlines()[0]
        assert "job ended, exit code 0" in header and "gone" not in header, shown
    finally:
        term.close()
