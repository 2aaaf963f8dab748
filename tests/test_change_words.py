"""The job's own stderr says a front end's changes in words, as the console and the TUI's
Log do (the fourth newcomer walk's item 14): it said `change: interrupt by=a front end,
signal=SIGINT`, and `ending the job ... as asked by a client` of the user's own q then e."""

from __future__ import annotations

import pytest
from conftest import WAIT

from stepdbg import client

pytestmark = [pytest.mark.usefixtures("private_runtime_dir")]


def test_an_interrupt_from_a_front_end_is_said_in_words(start_job):
    job = start_job("--break", "step==1", script_args=("--steps", "5"))
    job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        c.interrupt_job()
    _, _, err = job.finish()
    said = "change: Ctrl-C (SIGINT) sent to the job by a front end: its own Ctrl-C handling runs"
    assert err.count("sent to the job") == 1 and said in err and "by=a front end" not in err, err
    assert "Ctrl-C from a front end" not in err, err  # (once: it was said twice, in two wordings)


def test_an_end_from_a_front_end_is_not_said_as_a_clients(start_job):
    job = start_job("--break", "step==1", script_args=("--steps", "5"))
    job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        c.close(then="end")
    code, _, err = job.finish()
    assert code == 3 and "ending the job (exit code 3) as asked by a front end" in err, err
    assert "as asked by a client" not in err, err
