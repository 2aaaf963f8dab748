"""A repr left running by a locals view costs the job nothing for good (issue 43: the job
comes first). A read past its time was interrupted once and left running: a repr that spins in
Python and catches one interrupt took a CPU (and the GIL's share) beside the job until the
process ended, and every view started a thread more for a value past the 64 remembered, so a
front end refreshing the Break panel grew the job's threads without bound. Real threads, real
frames, in this process: the view is read as the locals op reads it."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import WAIT

from stepdbg.agent.views import locals_view

pytestmark = pytest.mark.timeout(300)


def _reads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "stepdbg-locals-read"]


def _frame(**values: object) -> object:
    ns = dict(values)
    exec("import sys\nframe = sys._getframe()", ns)
    return ns["frame"]


class Stubborn:
    """Spins in Python; takes the first interrupts for its own and goes on (as a loop with a
    broad `except` does), ending only at the third."""

    def __repr__(self) -> str:
        caught = 0
        while True:
            try:
                while True:
                    pass
            except BaseException:  # noqa: B036 - the user's code, as written in the wild
                caught += 1
                if caught >= 3:
                    raise


class Stuck:
    """Waits in C, where no interrupt lands, until the test lets it go."""

    gate = threading.Event()

    def __repr__(self) -> str:
        self.gate.wait()
        return "let go"


def test_a_repr_that_catches_the_interrupt_is_interrupted_again_until_it_ends(monkeypatch):
    monkeypatch.setattr(locals_view, "REPR_SECONDS", 0.2)
    monkeypatch.setattr(locals_view, "_left", {})
    rows = {r["name"]: r["value"] for r in locals_view.frame_locals(_frame(spins=Stubborn(), x=41))}
    assert rows["spins"] == "(its repr ran past 0.2 s: interrupted)" and rows["x"] == "41", rows
    deadline = time.monotonic() + WAIT
    while _reads():  # (before: it spun on for good)
        assert time.monotonic() < deadline, "the read left running never ended"
        time.sleep(0.05)


def test_no_more_reads_are_started_than_are_left_running(monkeypatch):
    monkeypatch.setattr(locals_view, "REPR_SECONDS", 0.05)
    monkeypatch.setattr(locals_view, "STOP_SECONDS", 0.01)
    monkeypatch.setattr(locals_view, "LEFT_MOST", 2)
    monkeypatch.setattr(locals_view, "_left", {})
    frame = _frame(a=Stuck(), b=Stuck(), c=Stuck())
    try:
        first = {r["name"]: r["value"] for r in locals_view.frame_locals(frame)}
        assert first["a"] == first["b"] == "(its repr ran past 0.05 s: interrupted)", first
        for _ in range(3):  # a front end that asks again at each refresh
            again = {r["name"]: r["value"] for r in locals_view.frame_locals(frame)}
            assert again["a"] == "(its repr from an earlier view is still running: not run again)", again
        assert len(_reads()) <= 2, f"{len(_reads())} reads running (before: one more at each view)"
        assert again["c"] == "(not read: 2 reprs of earlier views still run)", again
    finally:
        Stuck.gate.set()
    deadline = time.monotonic() + WAIT
    while _reads():
        assert time.monotonic() < deadline, "the reads let go never ended"
        time.sleep(0.05)


def test_a_stop_that_lands_past_the_reads_handlers_prints_nothing(capfd):
    """A stop sent as a read ends can land in threading's own code, past the read's handlers:
    Python's default thread hook drops an exact SystemExit in silence and prints a subclass's
    traceback on the job's stderr (the stop was a subclass: an attack of 8ff5a6b)."""
    def raises() -> None:
        raise locals_view.STOP

    t = threading.Thread(target=raises, name="stepdbg-locals-read")
    t.start()
    t.join()
    assert capfd.readouterr().err == ""
