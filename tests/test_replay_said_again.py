"""A replay of the same pause said again on the job's stderr is one line. The nineteenth
walk: after `q`, the terminal (the job's stderr, relayed once the TUI closes) showed each
replay's whole block again, `r` twice being two identical blocks; the TUI's Log already said
the second in one line (job_events.replay_lines)."""

from __future__ import annotations

from conftest import WAIT


def test_the_same_replay_twice_is_its_block_then_one_line(start_job):
    from stepdbg import client

    job = start_job("--break", "nan", script_args=("--nan-at", "3", "--steps", "5"))
    job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        first, again = c.replay(), c.replay()
        assert (first["summary"], first.get("verdict")) == (again["summary"], again.get("verdict"))
        c.close(then="end")
    _, _, err = job.finish()
    blocks = [ln for ln in err.splitlines() if ln.startswith(f"stepdbg: replay of step {first['step']}: ")]
    assert len(blocks) == 1, err
    assert f"stepdbg: replay of step {first['step']} again: the same finding" in err.splitlines(), err
    assert err.count(first["summary"]) == 1, err
