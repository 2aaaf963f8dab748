"""A locals view never holds the job (issue 43: every input untrusted; the job comes first).
Under the evaluator's guards (38a2e7f) a value's user code ran on the paused training thread
with one KeyboardInterrupt to stop it: a repr that caught it and waited on, or slept in C on a
training thread that is not the main one (the interrupt lands at the next bytecode), held the
pause for good: the view never answered and `c` was never heard. A tensor subclass's
`__torch_function__` ran unguarded while the rows were ordered by size, and a module whose
`parameters()` raised (or a subclass whose dtype did) failed the whole view. Now each such
value is read on a thread of its own while the training thread waits its time, and what its
code raised is said in its row."""

from __future__ import annotations

import threading

import pytest
from conftest import WAIT, in_time, paused_job

from stepdbg.agent.views import locals_view

pytestmark = [pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(300)]

VALUES = """\
import threading, time
import torch
from torch import nn

ARMED = False

class Swallows:
    def __repr__(self):
        while True:
            try:
                threading.Event().wait()
            except KeyboardInterrupt:
                pass

class Sleeps:
    def __repr__(self):
        time.sleep(3600)

class SleepyTensor(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if ARMED:
            time.sleep(3600)
        return super().__torch_function__(func, types, args, kwargs or {})

class BadTensor(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if ARMED:
            raise ValueError("no dtype for you")
        return super().__torch_function__(func, types, args, kwargs or {})

class Exits(nn.Module):
    def parameters(self, recurse=True):
        raise SystemExit(7)

class ExitsRepr:
    def __repr__(self):
        raise SystemExit(5)

def train():
    global ARMED
    swallows, sleeps, exits_repr, x = Swallows(), Sleeps(), ExitsRepr(), 41
    sleepy, bad = torch.zeros(3).as_subclass(SleepyTensor), torch.zeros(2).as_subclass(BadTensor)
    exits = Exits()
    ARMED = True
    model = nn.Linear(4, 1)
    for step in range(3):
        model(torch.randn(8, 4)).sum().backward()
"""

ON_MAIN = VALUES + 'train()\nprint("end", flush=True)\n'
ON_A_THREAD = VALUES + ('t = threading.Thread(target=train, name="trainer")\nt.start()\nt.join()\n'
                        'print("end", flush=True)\n')


@pytest.mark.parametrize("script_text", [ON_MAIN, ON_A_THREAD], ids=["main thread", "another thread"])
def test_a_repr_that_will_not_stop_never_holds_the_pause(start_job, tmp_path, monkeypatch, script_text):
    monkeypatch.setenv("STEPDBG_EVAL_TIMEOUT", "2")
    with paused_job(start_job, tmp_path, script_text, "--break", "step==1") as (job, c):
        rows = {r["name"]: r["value"] for r in in_time(c.frame_locals)}
        stopped = f"(its repr ran past {locals_view.REPR_SECONDS:.3g} s: interrupted)"
        assert rows["swallows"] == stopped and rows["sleeps"] == stopped and rows["sleepy"] == stopped, rows
        assert rows["bad"] == "<repr failed: ValueError>" and rows["exits"] == "<repr failed: SystemExit>", rows
        assert rows["exits_repr"] == "<repr failed: SystemExit>" and rows["x"] == "41", rows
        again = {r["name"]: r["value"] for r in in_time(c.frame_locals)}
        assert again["swallows"] == "(its repr from an earlier view is still running: not run again)", again
        assert in_time(lambda: c.evaluate("x + 1"))["value"] == "42"  # (the pause holds: the job answers)
        spun = in_time(lambda: c.evaluate("while True: pass"))  # (an eval still has its own time limit)
        assert "stopped at the 2 s time limit" in spun["error"], spun
        c.cont()
        assert c.wait_exited(WAIT)["exit_code"] == 0
    code, out, err = job.finish()
    assert code == 0 and out.strip() == "end", (out, err)
    assert "KeyboardInterrupt" not in err and "Traceback" not in err, err


def test_where_no_thread_can_be_started_the_view_still_answers(monkeypatch):
    """A process at its threads' limit: the row of a value that needs its own thread says so."""
    def refused(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refused)
    ns = {"shown": Shown(), "x": 41}
    exec("import sys\nframe = sys._getframe()", ns)
    rows = {r["name"]: r["value"] for r in locals_view.frame_locals(ns["frame"])}
    assert rows["shown"] == "(not read: no thread could be started to read it)" and rows["x"] == "41", rows


class Shown:
    def __repr__(self) -> str:
        return "shown"
