"""The twentieth newcomer walk's 1 (issue 45): after `o` nothing on screen said which ranks
get commands. `stepdbg --break nan torchrun --standalone --nproc_per_node=2 demos/ddp_nan.py`
in a real terminal (tmux); at the pause `0` (the Ranks panel), `o`, `1`, Enter, then `n`:
rank 1 moved to after_optimizer_step while the header said `rank 0/2` and the Ranks panel
had no word of who gets commands. Now the panel says it above its rows and the header
beside the rank. Then `q`, `e`: the job's end went to rank 1 alone (`ending the job` from
rank 1 only; rank 0 was ended by torchrun when rank 1 left): the end is the whole job's,
whatever `o` chose, and every rank says it ends as asked by the TUI."""

from __future__ import annotations

import shutil

import pytest
from conftest import DEMOS, Tmux
from test_walk17_ranks_launched import wait_words

from stepdbg_tui.header import render_header

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

ENDING = "ending the job (exit code 3) as asked by the TUI (q then e)"


@pytest.mark.slow
def test_o_says_who_gets_commands_and_q_e_ends_every_rank(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"--break nan torchrun --standalone --nproc_per_node=2 "
                f"{DEMOS / 'ddp_nan.py'}", size=(160, 48))
    try:
        wait_words(term, "step 6 · before_optimizer_step · PAUSED")
        term.keys("0")
        shown = wait_words(term, "this rank broke")  # (rank 1's row: the panel's rows are in)
        assert "stepping and changes go to every rank (o chooses)" in shown, term.screen()
        term.keys("o")
        wait_words(term, "now: every rank")
        term.keys("1", "Enter")
        shown = wait_words(term, "stepping and changes go to rank 1 (o chooses)")  # the Ranks panel
        assert "rank 0/2 · stepping and changes go to rank 1" in term.screen().splitlines()[0], term.screen()
        term.keys("n")
        shown = wait_words(term, "paused at the next pause point (after_optimizer_step)")  # rank 1's row alone
        assert "stepping and changes go to rank 1 (o chooses)" in shown, term.screen()
        assert "rank 0/2 · stepping and changes go to rank 1" in term.screen().splitlines()[0], term.screen()
        term.keys("q")
        wait_words(term, "What happens to the job?")
        term.keys("e")
        assert term.exit_code() == "3", term.screen()
        screen = term.screen()  # the terminal, the TUI gone: each rank's own line of its end
        for rank in (0, 1):
            assert f"stepdbg[rank {rank}]: {ENDING}" in screen, screen
    finally:
        term.close()


def test_the_header_says_the_ranks_chosen_at_80_columns():
    """At 80 columns the words are short, the state whole (`PAUSED` was cut for them at first)."""
    session = {"pid": 4242, "rank": 0, "world_size": 2, "argv": ["python", "ddp_nan.py"], "host": "vm",
               "started": 0.0}
    status = {"state": "paused", "step": 6, "phase": "before_optimizer_step",
              "paused": {"condition": "rank 1", "step": 6, "phase": "before_optimizer_step"}}
    wide = render_header(session, status, 3.0, "connected", 160, targets=[1]).plain
    assert "rank 0/2 · stepping and changes go to rank 1  ddp_nan.py" in wide, wide
    narrow = render_header(session, status, 3.0, "connected", 80, targets=[1]).plain
    assert "rank 0/2 · keys to rank 1  ddp_nan.py" in narrow and narrow.endswith("PAUSED"), narrow
    many = render_header(session, status, 3.0, "connected", 80, targets=[0, 2, 3]).plain
    assert "rank 0/2 · keys to 3 ranks  ddp_nan.py" in many and many.endswith("PAUSED"), many
    every = render_header(session, status, 3.0, "connected", 80).plain
    assert "to rank" not in every and "rank 0/2  ddp_nan.py" in every, every


def test_the_end_goes_to_every_live_rank_whatever_o_chose():
    """The console's `on 1` then `end` (or `q`) is routed as the TUI's q then e (RankView):
    every rank still there; stepping still to the ranks chosen."""
    from types import SimpleNamespace

    from stepdbg.client.job import Job

    job = Job([SimpleNamespace(exited=None), SimpleNamespace(exited=None), SimpleNamespace(exited={"exit_code": 1})])
    job.targets = [1]
    assert job._routed("end") == [0, 1] and job._routed("next_phase") == [1] and job._routed("status") == [0]
