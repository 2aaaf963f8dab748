"""The words of a job-wide stall report, from rows as the ranks send them (a unit test of
the rules; test_ranks runs the real thing on torchrun)."""

from stepdbg.agent.breaks.job_stall import diagnose


def row(rank, current=None, counts=None, line=10, idle=12.0):
    return {"rank": rank, "answered": True, "step": 7, "phase": "before_backward", "idle_s": idle,
            "where": {"file": "/x/train.py", "line": line, "function": "<module>", "code": ""},
            "current": current, "counts": counts or {}}


def coll(op, group, seq, line, ago=5.0):
    return {"op": op, "group": group, "seq": seq, "where": {"file": "/x/train.py", "line": line}, "started_s_ago": ago}


def test_a_rank_that_is_behind_and_one_that_does_not_answer():
    rows = [row(0, coll("broadcast", "default_pg", 9, 40), {"default_pg": 9}),
            row(1, None, {"default_pg": 8}, line=22),
            {"rank": 2, "answered": False}]
    assert diagnose(rows) == ("rank 1 has not reached broadcast #9 on default_pg (called at train.py:40 on rank 0) "
                              "and is not in a collective: at train.py:22 in <module>, step 7 (before_backward), "
                              "no progress for 12s; rank 0 waits in broadcast #9 on default_pg at train.py:40; "
                              "rank 2 did not answer: dead, or its agent is stuck")


def test_ranks_that_agree_on_the_collective_that_hangs():
    rows = [row(r, coll("all_gather_single", "default_pg", 3, 50), {"default_pg": 3}) for r in range(4)]
    assert diagnose(rows).startswith("every rank waits in all_gather_single #3 on default_pg: they agree on it")


def test_many_ranks_in_the_same_place_are_named_once():
    rows = [row(0, coll("all_reduce", "metrics", 12, 33, ago=9.0), {"metrics": 12, "default_pg": 39})]
    rows += [row(r, coll("all_reduce", "default_pg", 40, 35), {"metrics": 11, "default_pg": 40}) for r in (1, 2, 3)]
    said = diagnose(rows)
    assert said.startswith("ranks 1, 2 and 3 skipped all_reduce #12 on metrics (called at train.py:33 on rank 0) "
                           "and are waiting in all_reduce #40 on default_pg at train.py:35; "), said
    assert said.endswith("rank 0 waits in all_reduce #12 on metrics at train.py:33"), said
