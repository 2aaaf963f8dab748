"""Reading the job's threads runs none of the user's code and has a cost bound (attacking
f1a9e7d, issue 43: every input untrusted; every view has a cost bound).

A Thread subclass's `name` property (or `daemon`) is the user's code: thread_stacks read
`t.name`, so the stall watchdog ran it on its own thread, and one that slept held every stall
report for good (`--break stall>2`: no break). The watchdog asked for the stacks without saying
which thread trains, so with more than THREADS_MOST threads sorted before it by name, the
training thread's own stack was not read: the stall said 'no progress for 2.0s' and not where
it waits. And a frame on one line of 50 MB had that line stripped whole at each frame told
(8 threads 48 frames deep in it: 41 s a stacks view)."""

from __future__ import annotations

import queue
import sys
import threading
import time

import pytest
from conftest import WAIT

from stepdbg import client
from stepdbg.agent.measure import threads

pytestmark = [pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(300)]

SCRIPT = """\
import os, sys, threading, time
import torch

gate = threading.Event()

class Loud(threading.Thread):
    @property
    def name(self):
        time.sleep(3600)
        return "loud"

    @name.setter
    def name(self, value):
        pass

for i in range(300):  # (named before the training thread: past THREADS_MOST)
    threading.Thread(target=gate.wait, daemon=True, name=f"a-worker-{i}").start()
Loud(target=gate.wait, daemon=True).start()

def train():
    model = torch.nn.Linear(4, 1)
    for step in range(3):
        model(torch.randn(8, 4)).sum().backward()
        while step == 1 and not os.path.exists(sys.argv[1]):  # (stalled until the test has seen the break)
            gate.wait(0.05)

t = threading.Thread(target=train, name="trainer")
t.start()
t.join()
print("end", flush=True)
"""


def next_break(c: client.Client) -> dict:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            msg = c.events.get(timeout=1)
        except queue.Empty:
            continue
        if msg.get("event") == "break":
            return msg["data"]
    raise AssertionError("the stall's break never reached the client")


def test_a_stall_is_told_with_the_training_threads_stack_whatever_the_threads_are(start_job, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    job = start_job("--break", "stall>2", script=script, script_args=(str(tmp_path / "seen"),))
    job.info()
    with client.connect() as c:
        brk = next_break(c)
        assert brk["condition"] == "stall>2", brk["reason"]
        assert "the training thread waits at " in brk["reason"] and "gate.wait(0.05)" in brk["reason"], brk["reason"]
        told = {t["name"]: t for t in brk["details"]["threads"]}
        trainer = told["trainer"]
        assert trainer["stack"] and not trainer.get("stack_not_read"), trainer
        assert sum(name.startswith("a-worker-") for name in told) == 300
        (tmp_path / "seen").touch()
        assert c.wait_exited(WAIT)["exit_code"] == 0
    code, out, err = job.finish()
    assert code == 0 and out.strip() == "end", (out, err)


class Watched(str):
    """A line of code that keeps the length of each strip() of it."""

    stripped: list[int] = []

    def strip(self, chars: str | None = None) -> str:
        Watched.stripped.append(len(self))
        return str.strip(self, chars)


def test_a_frame_on_a_line_of_50_mb_is_told_cut_without_copying_the_line(tmp_path, monkeypatch):
    (tmp_path / "big_line.py").write_text("import threading\ngate = threading.Event()\n"
                                          "deep = lambda n: deep(n - 1) if n else gate.wait(); X = '"
                                          + "a" * 50_000_000 + "'\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import big_line
    finally:
        sys.path.remove(str(tmp_path))
    waiting = [threading.Thread(target=big_line.deep, args=(60,), daemon=True) for _ in range(4)]
    for t in waiting:
        t.start()
    try:
        ids = {t.ident for t in waiting}
        while len(mine := [s for s in threads.thread_stacks() if s["id"] in ids
                           and s["stack"][-1:] and s["stack"][-1]["function"] == "wait"]) < len(waiting):
            time.sleep(0.05)  # (until every one waits in the line)
        codes = {f["code"] for s in mine for f in s["stack"] if f["function"] == "<lambda>"}
        assert codes == {"deep = lambda n: deep(n - 1) if n else gate.wait(); X = '" + "a" * 143
                         + f"… [{50_000_058 - threads.NAME_MOST} more characters]"}, codes
        real = threads.source_lines.line
        monkeypatch.setattr(threads.source_lines, "line", lambda *a: Watched(real(*a)))
        threads.thread_stacks()
        assert Watched.stripped and max(Watched.stripped) <= 4 * threads.NAME_MOST, max(Watched.stripped)
    finally:
        big_line.gate.set()


def test_where_a_thread_20000_calls_deep_waits_looks_up_one_line(monkeypatch):
    """blocked_in (the status's waiting line, at every poll while the training thread waits)
    looked up the line of each of its frames."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 21_000))
    gate, ready = threading.Event(), threading.Event()

    def deep(n: int) -> None:
        if n:
            return deep(n - 1)
        ready.set()
        gate.wait()

    threading.stack_size(256 * 1024 * 1024)
    try:
        t = threading.Thread(target=deep, args=(20_000,), daemon=True)
        t.start()
    finally:
        threading.stack_size(0)
    try:
        assert ready.wait(WAIT)
        looked: list[int] = []
        real = threads.source_lines.line
        monkeypatch.setattr(threads.source_lines, "line", lambda *a: looked.append(1) or real(*a))
        where = threads.blocked_in(sys._current_frames()[t.ident], False)
        assert (where["function"], where["code"]) == ("deep", "gate.wait()"), where
        assert where["inner"].startswith("wait (threading.py:") and where["collective"] is None, where
        assert len(looked) <= 2, len(looked)
    finally:
        gate.set()
