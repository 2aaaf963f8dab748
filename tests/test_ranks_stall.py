"""A hang across ranks (real torchrun on gloo, CPU): where each rank waits, the time its
collective has left, and the job-wide stall report that names the collective a rank skipped."""

from __future__ import annotations

import json
import time

import pytest
from conftest import marked_line
from test_ranks import FIXTURE, WAIT, both_ranks, finish, start

from stepdbg.client import job

pytestmark = pytest.mark.slow  # real trainers and torchrun end to end (see pyproject: slow)


def test_a_stalled_rank_and_the_time_the_waiting_rank_has_left(tmp_path, private_runtime_dir):
    """Rank 1 hangs before its step-2 forward (a loader that stalls, until the test lets it
    go); rank 0 waits in the backward's all-reduce under the job's 60 s gloo timeout.
    Attached after the wait began, the ranks table shows rank 0 in a collective with the
    time left (the raised timeout only covers collectives started after the attach) and
    where rank 1 is stuck."""
    release = tmp_path / "release"
    proc = start(tmp_path, script_args=("--stall-at", "2", "--stall-until", str(release), "--steps", "4",
                                        "--timeout", "60"))
    assert proc.stdout is not None
    seen: dict[str, str] = {}
    for line in proc.stdout:  # the stall began, and rank 0's wait began before the attach: the job's own
        seen |= {w: line for w in ("rank 1 stalls", "rank 0 goes into the backward at ") if w in line}  # timeout
        if len(seen) == 2:  # is its (attached first, the raised one would cover its all-reduce: no time left)
            break
    # Rank 0's own clock (CLOCK_MONOTONIC, the machine's) where it went into the backward: its
    # wait began after it. This test's reading of the line may come seconds later on a busy machine.
    began = float(seen["rank 0 goes into the backward at "].split(" at ")[-1])
    ranks = job.Job(both_ranks(proc))  # then rank 0 enters the all-reduce: the loop below waits for it
    try:
        deadline = time.monotonic() + WAIT
        while (rows := ranks.rank_table())[0]["state"] != "in collective" and time.monotonic() < deadline:
            time.sleep(0.2)
        waited = time.monotonic() - began
        assert rows[0]["state"] == "in collective", rows
        assert "in backward (DDP's all-reduce) at ddp_train.py:" in rows[0]["note"]
        left = int(rows[0]["note"].split("s left")[0])
        assert 60 - waited - 2 <= left <= 59, (left, waited)  # counted from the wait's start, not the attach
        assert "s left of its 1m 00s collective timeout · waiting " in rows[0]["note"]
        assert rows[1]["state"] == "running" and rows[1]["note"].startswith("no progress for "), rows
        assert rows[1]["note"].endswith(f"at ddp_train.py:{marked_line(FIXTURE, 'stall')}"), rows  # in time.sleep
    finally:
        ranks.close()
        release.touch()
    code, out, err = finish(proc)
    assert code == 0, err[-2000:]


def test_a_skipped_collective_is_explained_across_ranks_and_abort_ends_the_job_with_3(tmp_path, private_runtime_dir):
    """Rank 1 skips the metrics all-reduce of step 5 (a logging `if`): rank 0 waits in it,
    rank 1 in backward's gradient all-reduce. The stall report, made by one rank from every
    rank's answer through the job's store, names both ranks, both collectives and both
    lines; --on-break abort then ends the whole job with exit code 3."""
    # stall>10: the report must be the skipped collective's, and a step a busy machine starves
    # may make no progress for 4 s by itself (test_demos' stall>2 fired on a 2 s starvation)
    proc = start(tmp_path, "--no-tui", "--break", "stall>10", "--on-break", "abort",
                 script_args=("--skip-metrics-at", "5", "--steps", "30"))
    code, out, err = finish(proc)
    assert code == 3, err[-3000:]
    metrics, backward = marked_line(FIXTURE, "metrics"), marked_line(FIXTURE, "backward")
    assert (f"rank 1 skipped all_reduce #6 on metrics (called at ddp_train.py:{metrics} on rank 0) and is waiting "
            f"in all_reduce (DDP's gradient buckets, in backward) at ddp_train.py:{backward}; "
            f"rank 0 waits in all_reduce #6 on metrics at ddp_train.py:{metrics}") in err, err[-3000:]
    assert f"rank 0  step 6  between steps  ddp_train.py:{metrics}  in all_reduce #6 on metrics for " in err
    assert "the job ended with exit code 3, as stepdbg ended it" in err and "ChildFailedError" not in err
    breaks = [json.loads(ln) for f in tmp_path.glob("r.rank*.jsonl") for ln in f.read_text().splitlines()
              if '"event": "break"' in ln]
    assert len(breaks) == 1, breaks  # one rank reports for the job; the other answered
    ranks = breaks[0]["details"]["ranks"]
    assert [(r["rank"], r["step"], r["current"]["op"], r["current"]["seq"], r["where"]["line"]) for r in ranks] == [
        (0, 6, "all_reduce", 6, metrics), (1, 6, "all_reduce", None, backward)]
    assert ranks[0]["counts"] == {"metrics": 6} and ranks[1]["counts"] == {"metrics": 5}
    assert ranks[0]["current"]["group"] == "metrics" and ranks[0]["stack"][-1].startswith("distributed_c10d.py:")


def test_the_console_ranks_command_explains_a_stall_the_job_is_still_in(tmp_path, private_runtime_dir):
    """Without abort the stalled job stays as it is; `ranks` (Job.ranks_text, what the console
    prints) shows the stall report above the rows while the ranks are still stuck."""
    import signal

    proc = start(tmp_path, "--no-tui", "--break", "stall>10", script_args=("--skip-metrics-at", "2", "--steps", "30"))
    ranks = job.Job(both_ranks(proc))
    try:
        deadline = time.monotonic() + WAIT
        while not (text := ranks.ranks_text())[0].startswith("job: "):
            assert time.monotonic() < deadline, text
            time.sleep(0.5)
        assert text[0].startswith("job: rank 1 skipped all_reduce #3 on metrics (called at ddp_train.py:"), text
        assert text[1].startswith("  rank 0  step 3  between steps  ddp_train.py:") and "rank 1  step 3" in text[2]
        assert text[3].startswith("* rank 0: in collective"), text
    finally:
        ranks.close()
        proc.send_signal(signal.SIGTERM)  # to torchrun, which ends the ranks
    code, _, err = finish(proc)
    assert code != 0
