"""A change made at a pause between steps (stepdbg.breakpoint() after the update, before the
next forward) is said after the step that ended, as the header and the break say it: it was
`change at step 6` under `after step 5 · PAUSED [breakpoint()]` (the between-steps flag was
left off while paused)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT, WAIT
from test_walk45_words import _script

from stepdbg import client
from stepdbg.wire.change_text import change_line


def test_an_lr_set_at_a_pause_between_steps_is_said_after_the_step_that_ended(tmp_path, private_runtime_dir):
    report = tmp_path / "r.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "stepdbg", "serve", "--report", str(report), sys.executable,
                             str(_script(tmp_path))], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        with _connect(proc) as c:
            brk = c.wait_paused(WAIT)
            assert brk is not None and brk["step"] == 5, brk
            c.call("set_lr", lr=0.001)
            c.cont()
        out, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    (change,) = [r for r in map(json.loads, report.read_text().splitlines()) if r.get("what") == "lr"]
    assert change_line(change).startswith("change after step 5: LR set to 0.001"), change


def _connect(proc: subprocess.Popen) -> client.Client:
    import time

    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            return client.connect()
        except client.TargetError:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
    raise AssertionError("the job never announced itself")
