"""The job's own SIGTERM handler (sys.exit, as a scheduler's preemption asks) ran while code
typed at a pause ran on the training thread: the eval's answer took its SystemExit as the
line's error, and the job stayed paused, its SIGTERM spent (a job the scheduler asked to end
went on holding its GPUs). Now the answer says it and the job ends, as it does without
stepdbg: exit code 0, its handler's line on stderr. A served job, a client's eval."""

from __future__ import annotations

import signal

from conftest import WAIT, paused_job
from test_attack_end_at_eval import SCRIPT as LOOP
from test_attack_end_at_eval import a_line_running

SCRIPT = """
import signal, sys
def on_term(n, f):
    print("job: SIGTERM, leaving", file=sys.stderr, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
""" + LOOP  # (its NaN at step 2: the break the line runs at)


def test_the_jobs_sigterm_handler_ends_it_while_code_runs_at_a_pause(start_job, tmp_path, private_runtime_dir):
    with paused_job(start_job, tmp_path, SCRIPT, "--break", "nan") as (job, c):
        asking, answers = a_line_running(c, tmp_path)
        job.proc.send_signal(signal.SIGTERM)
        asking.join(WAIT)
        assert answers, "no answer"
        assert "SystemExit: 0" in answers[0]["error"], answers
        assert "the job's own signal handler raised it as the line ran: the job ends with it" in answers[0]["error"]
        exited = c.wait_exited(WAIT)
    code, _, err = job.finish()
    assert code == 0, err
    assert exited is not None and exited.get("exit_code") == 0, exited
    assert "job: SIGTERM, leaving" in err and "internal error" not in err, err
