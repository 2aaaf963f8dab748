"""A locals view runs the user's reprs (issue 43's trust: "every view has a cost bound"). They
ran on the asking client's thread with no time limit: a repr that waits or spins held the
view for good (the TUI's Break panel asks for it at every pause). Now on the training thread
under the evaluator's guards: a value's repr has REPR_SECONDS, the view LOCALS_SECONDS; a
stopped row says so, the others stand, and the job goes on unharmed."""

from __future__ import annotations

import threading

import pytest
from conftest import WAIT, in_time, paused_job

from stepdbg.agent.views import locals_view

pytestmark = [pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(300)]

SCRIPT = """\
import threading
import torch
from torch import nn

class Waits:
    def __repr__(self):
        threading.Event().wait()
        return "never"

class Spins:
    def __repr__(self):
        while True:
            pass

class Shows:
    def __repr__(self):
        return "shown"

waits, spins, shows, x = Waits(), Spins(), Shows(), 41
model = nn.Linear(4, 1)
for step in range(3):
    model(torch.randn(8, 4)).sum().backward()
print("end", flush=True)
"""


def test_a_repr_that_waits_or_spins_is_stopped_and_the_rest_of_the_view_stands(start_job, tmp_path):
    with paused_job(start_job, tmp_path, SCRIPT, "--break", "step==1") as (job, c):
        rows = {r["name"]: r for r in in_time(c.frame_locals)}
        stopped = f"(its repr ran past {locals_view.REPR_SECONDS:.3g} s: interrupted)"
        assert rows["waits"]["value"] == stopped and rows["waits"]["type"] == "Waits", rows
        assert rows["spins"]["value"] == stopped, rows
        assert rows["shows"]["value"] == "shown" and rows["x"]["value"] == "41", rows
        assert "parameters" in rows["model"]["value"], rows
        assert c.evaluate("x + 1")["value"] == "42"  # (the pause holds: the job answers)
        c.cont()
        assert c.wait_exited(WAIT)["exit_code"] == 0
    code, out, err = job.finish()
    assert code == 0 and out.strip() == "end", (out, err)


class Slow:
    def __repr__(self) -> str:
        threading.Event().wait(0.3)
        return "slow"


def test_past_the_views_time_the_rows_left_say_what_they_are_and_that_they_were_not_read(monkeypatch):
    """The whole view's bound: twenty values whose reprs take 0.3 s each, a view of 1 s."""
    monkeypatch.setattr(locals_view, "LOCALS_SECONDS", 1.0)
    ns = {f"v{i:02d}": Slow() for i in range(20)}
    exec("import sys\nframe = sys._getframe()", ns)  # a top level whose variables they are
    shown = {r["name"]: (r["type"], r["value"]) for r in locals_view.frame_locals(ns["frame"])}
    unread = ("Slow", "(not read: the view's 1 s were spent)")
    assert [shown[f"v{i:02d}"] for i in range(3)] == [("Slow", "slow")] * 3, shown
    assert [shown[f"v{i:02d}"] for i in range(5, 20)] == [unread] * 15, shown
