"""One break of a torchrun job is said once, where it broke (issue 45, the twelfth walk's 1
and 3). ddp_nan's rank 1 breaks before its backward (ddp_nan.py:45); every rank pauses for
it at the update (ddp_nan.py:46). After the TUI closed the terminal said rank 1's break, then
rank 0's `paused for rank 1's break`, then rank 1's `this rank broke` again; and the Break
panel of rank 1 said the update's phase and line, not where it broke. Headless, every rank
said `the job goes on: report is the default action ...`."""

from __future__ import annotations

import shutil

import pytest
from conftest import DEMOS, Tmux
from test_ranks import finish, start

pytestmark = pytest.mark.slow  # real torchrun jobs on gloo

DEMO = DEMOS / "ddp_nan.py"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_break_is_said_once_where_it_broke(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"torchrun --standalone --nproc_per_node=2 {DEMO}", size=(200, 60))
    try:
        term.wait_screen("step 6 · before_optimizer_step · PAUSED")
        term.keys("t")  # rank 1, the rank that broke, in view: its Break panel
        panel = term.wait_screen("paused with every rank at step 6")
        assert "step 6 · before_backward · [nan] loss is nan" in panel, panel
        assert f"at {DEMO}:45 in main" in panel, panel
        assert "paused with every rank at step 6 (before_optimizer_step) at ddp_nan.py:46" in panel, panel
        assert "this rank broke" not in panel, panel
        term.keys("c")
        term.wait_screen("job ended, exit code 0")
        term.keys("q")
        assert term.exit_code() == "0", term.screen()
        rows = [r.strip() for r in term.screen().splitlines()]  # the terminal, the TUI gone
        said = [r for r in rows if "break at step 6" in r]
        assert len(said) == 1 and said[0].startswith("[default1]:stepdbg[rank 1]: break at step 6 (before_backward)"), (
            "\n".join(rows))
        assert [r for r in rows if " at " in r and "ddp_nan.py:" in r] == [f"[default1]:  at {DEMO}:45  loss.backward()"], (
            "\n".join(rows))
        assert "[default0]:step 15 loss nan" in rows and "[default1]:rank 1 done" in rows, "\n".join(rows)  # (the rest)
    finally:
        term.close()


def test_headless_the_default_actions_note_is_said_once(tmp_path, private_runtime_dir):
    proc = start(tmp_path, script=DEMO)  # (not at a terminal: headless, as the suite runs it)
    code, out, err = finish(proc)
    assert code == 0 and "rank 0 done" in out and "rank 1 done" in out, err[-2000:]
    assert err.count("report is the default action") == 1, err
    assert "stepdbg[rank 1]: break at step 6 (before_backward) [nan]" in err, err
