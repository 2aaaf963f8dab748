"""A one-process job's stdout lines come before the event line stepdbg said after them,
whichever of the launcher's two reader threads runs first (issue 45, item 8: `stepdbg:
break at step 3` relayed before `step 2 loss` on the terminal after the TUI closed).

Real pipes and threads, the order forced: the stderr reader runs first, the stdout reader
only once the stderr line is read."""

from __future__ import annotations

import os
import threading

import pytest

from stepdbg_tui import stream_order
from stepdbg_tui.rank_order import SAID
from stepdbg_tui.stream_order import StdoutFirst

WAIT = 60.0  # a ceiling only a hang reaches


def _relay_with_stderr_first(lines_out: bytes, line_err: str) -> list[str]:
    """The launcher's two relays over real pipes: stderr's reader is started and has read
    its line before stdout's reader starts."""
    lock, got = threading.Lock(), []
    out_r, out_w = os.pipe()

    def write() -> None:  # (from a thread of its own: more than a pipe holds waits for the reader)
        with os.fdopen(out_w, "wb") as w:
            w.write(lines_out)

    writer = threading.Thread(target=write)
    writer.start()
    if len(lines_out) <= 4096:  # (what the job printed is in the pipe before the line after it)
        writer.join(WAIT)
    stdout = os.fdopen(out_r, errors="replace")
    first = StdoutFirst(lock, stdout)
    said = threading.Event()

    def stderr_relay() -> None:
        with lock:
            said.set()
            if SAID.match(line_err):
                first.wait_for_stdout()
            got.append(line_err)

    def stdout_relay() -> None:
        said.wait(WAIT)
        first.read(got.append)

    threads = [threading.Thread(target=stderr_relay), threading.Thread(target=stdout_relay)]
    for t in threads:
        t.start()
    for t in (*threads, writer):
        t.join(WAIT)
    stdout.close()
    return got


def test_the_steps_printed_before_a_break_come_before_its_line():
    got = _relay_with_stderr_first(b"step 1 loss 0.1\nstep 2 loss 0.09\n",
                                   "stepdbg: break at step 3 (before_backward) [nan]: loss is nan")
    assert got == ["step 1 loss 0.1", "step 2 loss 0.09",
                   "stepdbg: break at step 3 (before_backward) [nan]: loss is nan"]


def test_without_the_wait_the_break_came_first(monkeypatch):
    """What the relay did before (no wait at all): this test's order is the one the walk met.
    (Not HELD_AT_MOST = 0: Condition.wait_for still waits once with a timeout of 0, letting
    go of the lock, and the stdout reader could take it in that moment: flaky under load.)"""
    monkeypatch.setattr(stream_order.StdoutFirst, "wait_for_stdout", lambda self: None)
    got = _relay_with_stderr_first(b"step 2 loss 0.09\n", "stepdbg: break at step 3 (before_backward) [nan]")
    assert got[0].startswith("stepdbg: break at step 3")


@pytest.mark.parametrize("raw, lines", ids=["newlines", "no-newline", "bad-utf8", "long-line"], argvalues=[
    (b"a\r\nb\rc\n", ["a", "b", "c"]),  # newlines translated, as the text stream read them
    (b"no newline at the end", ["no newline at the end"]),
    (b"\xff\xfe bad utf-8\n", ["\ufffd\ufffd bad utf-8"]),
    ("caf\u00e9 " .encode() * 20000 + b"\n", ["caf\u00e9 " * 20000]),  # a line over many reads, a character across two
])
def test_stdout_is_read_as_the_text_stream_read_it(raw, lines):
    got = _relay_with_stderr_first(raw, "a line of the job's own on stderr")
    assert got == ["a line of the job's own on stderr", *lines]
