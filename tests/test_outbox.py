"""A client's outbox (agent/serve/outbox.py) over a real socket pair: a client that went
away by itself (killed, its window closed) ends its outbox quietly; one that stalls is
dropped and said. A TUI killed by SIGKILL had made the job print "dropped a client: the
connection failed: [Errno 32] Broken pipe" when the send lost the race with the reader."""

from __future__ import annotations

import socket
import threading

from stepdbg.agent.serve.outbox import Outbox
from stepdbg.wire import protocol


def test_a_client_that_went_away_is_not_news():
    ours, theirs = socket.socketpair()
    told: list[str] = []
    gone = threading.Event()
    box = Outbox(ours, on_drop=told.append, stall=30)
    theirs.close()  # the client is gone before the next event
    while box.dropped is None:
        box.put(protocol.event("step", {"step": 1, "earlier": []}))
        gone.wait(0.01)
    assert told == [] and box.dropped.startswith("it went away"), (told, box.dropped)
    ours.close()


def test_a_client_that_reads_nothing_is_dropped_and_said():
    ours, theirs = socket.socketpair()
    told: list[str] = []
    box = Outbox(ours, on_drop=told.append, stall=0.2)
    big = protocol.event("output", ["x" * 60_000])
    while box.dropped is None:  # fills the socket's buffer; then nothing is read for 0.2 s
        box.put(big)
        threading.Event().wait(0.01)
    assert told == ["it read nothing for 0.2s"] or told and told[0].startswith("it fell"), told
    ours.close()
    theirs.close()


def test_messages_from_many_threads_arrive_whole_and_in_each_threads_order():
    """A message is written at once when nothing is queued before it, else queued for the
    sender: either way frames never interleave and each thread's order holds."""
    ours, theirs = socket.socketpair()
    n, writers = 3000, 3
    box = Outbox(ours, on_drop=lambda why: None, limit=n * writers, stall=30)

    def write(w: int) -> None:
        for i in range(n):
            box.put(protocol.event("output", {"w": w, "i": i, "pad": "x" * (i % 700)}))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    decoder, got = protocol.FrameDecoder(), []
    theirs.settimeout(60)
    while len(got) < n * writers and box.dropped is None:
        got += decoder.feed(theirs.recv(1 << 16))
    for t in threads:
        t.join()
    for w in range(writers):
        assert [m["data"]["i"] for m in got if m["data"]["w"] == w] == list(range(n))
    assert box.dropped is None
    box.close(wait=5)
    ours.close()
    theirs.close()
