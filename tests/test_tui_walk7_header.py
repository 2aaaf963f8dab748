"""The header at 80x24 after the sixth newcomer walk (issue 45's (e)): no part left out where
the columns left blank would hold it, and after ctrl+r found the job gone, the header says
it is gone. Real jobs: the TUI under Pilot (conftest's tui_at_break), and `stepdbg attach`
in a real terminal (tmux) to a served job killed by SIGKILL. Each failed before its fix."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys

import pytest
from conftest import DEMOS, Tmux
from test_tui_fixes import real
from tui_walk import screen_text, settled


def left_out_beside_blanks(line: str, host: str) -> str | None:
    """The host left out of the header's `line` where its blank columns would hold it as
    ` @vm`: those between its left and right parts (less the one that keeps them apart) and
    those at its right end; else None."""
    body = line[1:]  # (the header's left padding)
    gaps = [len(m.group(0)) for m in re.finditer(r"(?<=\S) {2,}(?=\S)", body)]
    spare = max(gaps, default=1) - 1 + len(body) - len(body.rstrip())
    if f"@ {host}" in line or f"@{host}" in line or spare < len(host) + 2:
        return None
    return f"{spare} blank columns, ` @{host}` needs {len(host) + 2}"


@real
async def test_at_80x24_the_host_is_not_left_out_beside_blank_columns(tui_at_break):
    """The sixth walk's 6: the header left `@ vm` out with five columns blank beside it (ddp_nan:
    `pid N rank 0/2  ddp_nan.py     step 6 · ...`); here `nan_log.py` paused on `loss>0`, it
    was `pid N  nan_log.py    00:00:01 · step 0 · before_backward · PAUSED [loss>0] ` (four
    blank columns, and one at the end). The host is said as ` @vm` where ` @ vm` does not
    fit and that does, and the header's right padding column is the header's."""
    async with tui_at_break("--break", "loss>0", script=DEMOS / "nan_log.py", size=(80, 24)) as (app, pilot):
        await settled(pilot, app)
        host = str(app.source.session.get("host") or "")
        line = screen_text(app, skip=()).splitlines()[0]
        assert "PAUSED [loss>0]" in line and left_out_beside_blanks(line, host) is None, line


@real
def test_after_ctrl_r_finds_a_killed_job_gone_the_header_says_it_is_gone(tmp_path, private_runtime_dir):
    """The sixth walk's 6: `stepdbg attach` to a served job, the job killed by SIGKILL, ctrl+r:
    a toast said the job is gone, and the header said `connection lost: the connection to
    the …` on (its pid given way). The header says the job (its pid) is gone."""
    if shutil.which("tmux") is None:
        pytest.skip("needs tmux")
    (tmp_path / "serve").mkdir()
    served = Tmux(tmp_path / "serve", private_runtime_dir,
                  f"serve --break step==2 {sys.executable} tests/fixtures/train_loop.py --steps 50")
    term = None
    try:
        served.wait_screen("listening")
        term = Tmux(tmp_path, private_runtime_dir, "attach", size=(80, 24))
        term.wait_screen("PAUSED [step==2]")
        pid = json.loads(next(private_runtime_dir.glob("*.json")).read_text())["pid"]
        os.kill(pid, signal.SIGKILL)
        term.wait_screen("connection lost")
        term.keys("C-r")
        screen = term.wait_screen(f"job (pid {pid}) gone")
        assert f"connection lost: job (pid {pid}) gone" in screen.splitlines()[0], screen
    finally:
        served.close()
        if term is not None:
            term.close()
