"""A break whose words are huge is told cut, so every client hears it and the end (the attack
on this session's new surfaces: the status's and the end's `last_break`). A loop's own check raised at step 2 with a message of one 6 MB line (a batch's ids): the end's
`exited` carried that break whole (its reason, its message, its traceback: 18 MB, over the
wire's 16 MB frame), which server.broadcast drops, so no client heard the end ('lost the
connection'); the end's `error` (the traceback) alone was 6 MB; at the pause the `paused`
event (a client never knew the job waited) and the status, so the welcome of a client
attaching, were over the frame too. A real served job,
a client attached before the loop starts."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from conftest import WAIT
from test_tui_fixes import real

from stepdbg import client
from stepdbg.wire import protocol

SCRIPT = Path(__file__).parent / "fixtures" / "huge_error.py"
STATUS_MOST = 256 * 1024  # bytes: a status's answer at the pause (its break's words, cut)


def drained(job: object) -> None:
    """The job's stdout and stderr read as they come (its 6 MB lines would fill the pipes and hold it)."""
    for stream in (job.proc.stdout, job.proc.stderr):  # type: ignore[attr-defined]
        threading.Thread(target=stream.read, daemon=True).start()


@real
def test_the_end_of_a_job_whose_error_is_huge_is_heard(start_job, tmp_path):
    go = tmp_path / "go"
    job = start_job(script=SCRIPT, script_args=("--start-after", str(go)))
    job.info()
    drained(job)
    with client.connect() as c:
        go.touch()
        brk = c.wait_paused(WAIT)  # (a front end attached: the error's break pauses)
        assert brk is not None and brk["reason"].startswith("ValueError: bad batch: 777"), c.exited
        c.cont()  # (the error goes on to the script: it ends)
        end = c.wait_exited(WAIT)
        assert end is not None and end.get("exit_code") == 1 and "lost" not in end, end
        brk = end.get("last_break") or {}
        assert brk.get("step") == 2 and str(brk.get("reason", "")).startswith("ValueError: bad batch: 777"), brk
        assert len(protocol.encode(protocol.event("exited", end))) < protocol.MAX_FRAME // 8


@real
def test_a_client_attaches_to_a_job_paused_at_a_huge_error(start_job, tmp_path):
    """The status (the welcome's too) held the pause's break whole: a second client's attach
    timed out ('no answer from ...sock: timed out'), the welcome being over the frame."""
    go = tmp_path / "go"
    job = start_job(script=SCRIPT, script_args=("--start-after", str(go)))
    job.info()
    drained(job)
    with client.connect() as first:
        go.touch()
        assert first.wait_paused(WAIT) is not None, first.exited
        with client.connect(timeout=WAIT) as second:
            said = second.status_at_attach.get("paused") or {}
            assert said.get("step") == 2 and said["reason"].startswith("ValueError: bad batch: 777"), said
            assert "more characters not shown" in said["reason"], said["reason"][-200:]
            assert len(json.dumps(second.status())) < STATUS_MOST, "the status holds the break whole"
        first.close(then="end")
