"""The bundle names the user's script, whatever break saved it (issue 44). At an exception
break the script has ended and `__main__` is stepdbg's launcher again: the bundle recorded
`stepdbg/launch/bootstrap.py` as the script and the model's file, and `stepdbg replay` read
the launcher's definitions ("bootstrap.py has no LogNet")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, WAIT, marked_line, run_stepdbg

from stepdbg.agent.replay.verdict import REPRODUCED

SCRIPT = ROOT / "tests" / "fixtures" / "raises_on_nan_top_level.py"


def test_a_bundle_saved_at_an_exception_break_replays_the_users_top_level_script(tmp_path):
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "exception", "--on-break", "save", "--bundle-dir",
                      str(bundles), script_args=(str(SCRIPT),))
    assert run.returncode == 1 and "FloatingPointError: loss is nan at step 3" in run.stderr, run.stderr[-2000:]
    (brk,), (event,) = run.of("break"), run.of("bundle")
    assert (brk["phase"], brk["step"], event["saved"]) == ("exception", 3, True), (brk, event)
    meta = json.loads((Path(event["path"]) / "meta.json").read_text())
    assert (meta["model"]["script"], meta["model"]["file"]) == (str(SCRIPT), str(SCRIPT)), meta["model"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    got = subprocess.run([sys.executable, "-m", "stepdbg", "replay", "--json", event["path"]], cwd=elsewhere,
                         capture_output=True, text=True, timeout=WAIT, stdin=subprocess.DEVNULL)
    assert got.returncode == 0 and f"the definitions of {SCRIPT}" in got.stderr, got.stderr
    replay = json.loads(got.stdout)
    first = replay["first_nonfinite"]
    assert (first["where"], first["op"], first["line"]) == ("forward", "log", marked_line(SCRIPT, "nan-op")), first
    assert (replay["reproduced"], replay["verdict"]) == (True, REPRODUCED), replay
