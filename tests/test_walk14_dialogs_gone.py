"""The closing walk's 11 (issue 45), a job launched here: after `kill -9` the launcher's toast
said `exit code unknown` while its header said 137. Where the connection is lost and the job's
process (a child of this launcher) is gone, the toast of a key pressed on a panel gives
its end as its parent knows it: killed by SIGKILL, exit code 137. Pilot picture at 80x24, the
fake job with a real child process killed."""

from __future__ import annotations

import subprocess
import sys

import pytest
from fake_source import FakeSource
from tui_walk import screen_text, settled

from stepdbg_tui.app import StepdbgApp

pytestmark = pytest.mark.timeout(60)


async def test_a_launched_job_gone_is_said_with_its_exit_code_not_unknown():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    child.kill()
    child.wait()
    app = StepdbgApp(FakeSource(paused=True), clock=lambda: 1754.0)
    app.source.session = {**app.source.session, "pid": child.pid, "host": None}
    app.child = child
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settled(pilot, app)
        app.connection_lost("the connection to the job closed")  # (the launcher's own path when the
        await settled(pilot, app)  # child outlived the loss by a while: launched_job_gone)
        await pilot.press("c")
        await settled(pilot, app)
        shown = " ".join(screen_text(app, skip=()).split())
        said = [str(n.message) for n in app._notifications]  # (pressed on a panel: its toast, the loss's gone)
        assert said == [f"the job (pid {child.pid}) killed by SIGKILL (exit code 137 / -9): nothing to continue. "
                        "The panels still show its last values; q quits"], said
        assert "unknown" not in shown and "ctrl+r" not in shown, shown
