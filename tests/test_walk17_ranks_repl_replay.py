"""A REPL attached to a job says another client's replay of each rank, once (issue 45, the
seventeenth walk's 1). ddp_nan on two ranks under torchrun, paused for rank 1's break; `stepdbg
attach --repl JOB` in a real terminal (tmux, 80x24: rank 0 in view) and a first front end that
replays every rank (the TUI's `r`): the REPL printed nothing, while one attached to a single
process (test_walk15_ranks_console_replay) says `replay of step 6 (another client asked): ...`.
The REPL's own `r` is said by its answer, its ranks' events not again."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import DEMOS, Tmux
from test_ranks import WAIT, finish, ranks_of, run_to_end, start

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]

ELSEWHERE = "(another client asked): "


@pytest.mark.timeout(WAIT * 3)
def test_a_repl_on_the_job_says_each_ranks_replay_another_client_ran(tmp_path, private_runtime_dir):
    proc = start(tmp_path, "serve", "--break", "nan", script=DEMOS / "ddp_nan.py")
    term = None
    with ranks_of(proc) as first:
        try:
            for c in first:
                assert c.wait_paused(WAIT) is not None, "a rank never paused"
            job_id = first[0].session["job_id"]
            term = Tmux(tmp_path, private_runtime_dir, f"attach --repl {job_id}", size=(80, 24),
                        env=f"XDG_STATE_HOME={tmp_path}")
            term.wait_screen("paused at step 6")
            with ThreadPoolExecutor(2) as pool:  # the TUI's r: every rank replays at once
                answers = list(pool.map(lambda c: c.replay(), first))
            for rank, answer in enumerate(answers):
                term.wait_screen(f"replay of step 6 on rank {rank} {ELSEWHERE}{answer['summary'][:20]}")
            term.keys("r", "Enter")  # the REPL's own r: said by its answer
            term.wait_screen("dataset index 201")
            term.keys("info status", "Enter")
            shown = term.wait_screen("names it")
            for rank in (0, 1):
                assert shown.count(f"replay of step 6 on rank {rank} {ELSEWHERE}") == 1, shown
            term.keys("detach", "Enter")
            assert term.exit_code() == "0", term.screen()
            run_to_end(*first)  # (before the terminal goes: its close kills what is left of the job)
        finally:
            if term is not None:
                term.close()
    code, _, err = finish(proc)
    assert code == 0, err[-2000:]
