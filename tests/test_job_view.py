"""The whole-job view's words: rank sets, durations, what a waiting rank waits in, how
a dead rank ended, and what torchrun's output says of each rank. Pure functions; the
real torchrun jobs that produce these are in test_ranks.py and test_remote.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from stepdbg.client.job import TorchrunLog, duration, gone_note, parse_ranks, rank_row, wait_note

WAIT = {"file": "/x/train.py", "line": 40, "function": "<module>", "inner": "_engine_run_backward (graph.py:829)"}


def test_rank_sets():
    assert parse_ranks("0,2-3", 4) == [0, 2, 3] and parse_ranks("all", 3) == [0, 1, 2]
    with pytest.raises(ValueError, match="no rank 4: the job has ranks 0-3"):
        parse_ranks("4", 4)
    with pytest.raises(ValueError, match="bad rank set"):
        parse_ranks("1-x", 4)


@pytest.mark.parametrize(("seconds", "words"), [(12.3, "12s"), (754, "12m 34s"), (7384, "2h 03m"),
                                                (604800, "7d 0h")])
def test_durations(seconds, words):
    assert duration(seconds) == words


def test_a_rank_in_a_collective_says_how_long_its_timeout_leaves():
    w = {**WAIT, "idle_s": 95.0, "collective": "all_reduce", "timeout_s": 600.0, "left_s": 505.0}
    assert wait_note(w) == "8m 25s left of its 10m 00s collective timeout · waiting 1m 35s in all_reduce at train.py:40"
    raised = {**w, "timeout_s": 604800.0, "left_s": 604705.0}
    assert wait_note(raised).startswith("no collective timeout while a client is attached · waiting 1m 35s")


def test_a_stalled_rank_says_where_it_is():
    w = {**WAIT, "idle_s": 30.0, "collective": None, "timeout_s": None, "left_s": None,
         "inner": "_poll (connection.py:440)"}
    assert wait_note(w) == "no progress for 30s, at train.py:40 in _poll (connection.py:440)"


def test_how_a_dead_rank_ended():
    assert gone_note({"exit_code": None, "lost": "closed"}, []) == \
        "no exit code seen: killed by a signal, os._exit or a crash"
    assert gone_note({"exit_code": -9, "exit_code_from": "torchrun"}, ["step 5", "  "]) == \
        "killed by SIGKILL (from torchrun); last output: step 5"
    error = 'Traceback (most recent call last):\n  File "/x/train.py", line 12, in <module>\nValueError: bad batch\n'
    assert gone_note({"exit_code": 1, "error": error}, []) == "exit code 1; ValueError: bad batch at train.py:12"


def test_torchrun_output_gives_exit_codes_by_pid_and_each_ranks_last_lines():
    log = TorchrunLog()
    for line in ["[default0]:step 1", "[default1]:rank 1 dies now", "[default1]:",
                 "W1122 api.py:1028] Sending process 11 closing signal SIGTERM",
                 "E1122 api.py:1002] failed (exitcode: 7) local_rank: 1 (pid: 12) of binary: python",
                 "  exitcode  : -15 (pid: 13)  (SIGTERM)"]:
        log.feed(line)
    assert log.about({"pid": 12, "local_rank": 1}) == ({"exit_code": 7, "exit_code_from": "torchrun"},
                                                        ["rank 1 dies now"])
    assert log.ends[11] == {"stopped_by": "torchrun sent SIGTERM after a rank failed"}
    assert log.ends[13]["exit_code"] == -15
    lost = SimpleNamespace(exited={"exit_code": None, "lost": "closed"}, output_tail=[],
                           session={"pid": 12, "local_rank": 1})
    row = rank_row(1, lost, None, None, log)
    assert (row["state"], row["note"]) == ("dead", "exit code 7 (from torchrun); last output: rank 1 dies now")


def test_a_row_for_a_rank_in_a_collective():
    live = SimpleNamespace(exited=None, output_tail=[], session={})
    status = {"state": "running", "step": 4, "phase": "before_backward", "paused": None,
              "waiting": {**WAIT, "idle_s": 5.0, "collective": "backward (DDP's all-reduce)",
                          "timeout_s": 60.0, "left_s": 55.0}}
    row = rank_row(0, live, status, {"loss": 0.5, "grad_norm": 1.0})
    assert row["state"] == "in collective" and row["loss"] == 0.5 and row["note"].startswith("55s left of its 1m 00s")


def test_a_paused_rank_shows_the_numbers_of_the_step_it_is_paused_in():
    """Rank 1 broke on a NaN loss at step 3; rank 0 paused for it. Each row shows its own
    current step, not the last finished one (which was finite on both)."""
    alive = SimpleNamespace(exited=None, output_tail=[])
    last = {"loss": 0.52, "grad_norm": 1.1}
    nan = {"state": "paused", "step": 3, "phase": "before_optimizer_step",
           "paused": {"reason": "loss is nan", "scalars": {"loss": "nan", "grad_norm": "nan"}}}
    fine = {"state": "paused", "step": 3, "phase": "before_optimizer_step",
            "paused": {"reason": "paused for rank 1's break", "scalars": {"loss": 0.49, "grad_norm": 1.0}}}
    assert (rank_row(1, alive, nan, last)["loss"], rank_row(0, alive, fine, last)["loss"]) == ("nan", 0.49)
    assert rank_row(0, alive, {**fine, "state": "running", "paused": None}, last)["loss"] == 0.52


def test_compare_marks_the_rank_that_differs():
    from stepdbg.client.job import odd_ranks

    assert odd_ranks([(0, "0.52"), (1, "0.52"), (2, "nan"), (3, "0.52")]) == {2}
    assert odd_ranks([(0, "0.5168"), (1, "nan")]) == {1}  # two ranks: the one that is not finite
    assert odd_ranks([(0, "1.0"), (1, "2.0")]) == set() and odd_ranks([(0, "3"), (1, "3")]) == set()
