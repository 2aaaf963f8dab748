"""stepdbg's threads that call into torch are over when the session stops: a daemon
thread still in a torch call (the job's store, a tensor's statistics) as the interpreter
finalizes is ended by pthread_exit, and the process then aborts with SIGABRT
(`terminate called without an active exception`) instead of exiting with its code: a
torchrun job ended with `q` exited 1, not 3, once in CI."""

from __future__ import annotations

from stepdbg import client


def test_the_watchdog_thread_has_ended_when_stop_returns(session_factory):
    for _ in range(20):  # (before, stop() only set an event: the thread was alive after it, nearly always)
        s = session_factory("stall>30")
        thread = s._watchdog._thread
        assert thread.is_alive()
        s.stop()
        assert not thread.is_alive()


def test_a_clients_threads_have_ended_when_the_session_stops(session_factory, private_runtime_dir):
    from stepdbg.agent.serve.server import serve

    s = session_factory("nan")
    server = serve(s, announce=False)
    c = client.connect(server.info.id)
    try:
        assert c.status()["frontends"] == 1
        threads = set(server._threads)
        assert {t.name for t in threads} == {"stepdbg-client-1", "stepdbg-client-1-requests"}
        s.stop()
        assert not any(t.is_alive() for t in threads)
    finally:
        c.close()


def test_two_clients_threads_say_which_client_they_serve(start_job):
    """`info threads` (and the Threads panel, from the same `stacks`) with two clients attached:
    each client's reader, request worker and sender say its number (they were three pairs of
    `stepdbg-client`, `stepdbg-requests`, `stepdbg-sender`, nothing to tell them apart)."""
    import subprocess
    import sys

    from conftest import ROOT, WAIT

    job = start_job("--break", "nan")
    job.info()
    with client.connect() as first:
        first.status()
        run = subprocess.run([sys.executable, "-m", "stepdbg", "attach", "--repl"], input="info threads\ndetach\n",
                             capture_output=True, text=True, cwd=ROOT, timeout=WAIT)
        first.close(then="end")
    job.proc.wait(WAIT)
    names = [line[4:].split(" (")[0] for line in run.stderr.splitlines() if line.startswith("--- stepdbg-client")]
    assert sorted(names) == ["stepdbg-client-1", "stepdbg-client-1-requests", "stepdbg-client-1-sender",
                             "stepdbg-client-2", "stepdbg-client-2-requests", "stepdbg-client-2-sender"], run.stderr
    # ... and whose: the console's own threads say they serve it (the closing walk's 24)
    said = {line[4:].split(" (")[0]: line for line in run.stderr.splitlines() if line.startswith("--- stepdbg-client")}
    assert all(said[f"stepdbg-client-2{s}"].endswith("(stepdbg's own thread: it serves you)")
               and said[f"stepdbg-client-1{s}"].endswith("(stepdbg's own thread: it serves another client)")
               for s in ("", "-requests", "-sender")), run.stderr
