"""Each client selects its own frame: `u` in one client (the TUI) does not move another's
(an open `attach --repl`): the tenth walk saw the TUI's `u` change what the console's `p x`
and `w` answered. A pause selects the innermost frame for every client."""

from __future__ import annotations

import pytest
from conftest import ROOT, WAIT

from stepdbg import client

pytestmark = [pytest.mark.usefixtures("private_runtime_dir")]

DEMO = ROOT / "demos" / "nan_log.py"  # main() holds x, the batch; <module> calls main()


def selected(frames: list[dict]) -> str:
    (sel,) = [f["function"] for f in frames if f["selected"]]
    return sel


def test_u_in_one_client_leaves_anothers_frame_where_it_was(start_job):
    job = start_job("--break", "nan", "--break", "step==4", script=DEMO, script_args=("--bad-step", "3", "--steps", "6"))
    job.info()
    with client.connect() as tui, client.connect() as repl:
        tui.wait_paused(WAIT)
        assert selected(tui.frames(move=1)) == "<module>"  # the TUI's u
        assert selected(repl.frames()) == "main"  # the console's w: still main, where the job paused
        assert repl.summary("x")["shape"] == [64, 8]  # p x: main's batch
        assert selected(tui.frames()) == "<module>"  # the TUI's own selection holds
        assert tui.evaluate("'x' in dir()")["value"] == "False"  # <module> has no x
        repl.frames(move=1)
        assert selected(tui.frames(move=-1)) == "main" and selected(repl.frames()) == "<module>"
        tui.cont()
        tui.wait_paused(WAIT)  # the next pause: the innermost again, for each
        assert selected(tui.frames()) == "main" and selected(repl.frames()) == "main"
        tui.close(then="end")
    job.proc.wait(WAIT)


def test_an_eval_sees_the_jobs_own_context_variables(start_job, tmp_path):
    """A request run on the training thread runs in the job's own context (only the frame
    selection is the client's): an eval read a ContextVar's default, not the job's value,
    when it ran in a copy of the client's thread's context."""
    script = tmp_path / "ctx.py"
    script.write_text("import contextvars, torch\n"
                      "cv = contextvars.ContextVar('cv', default='default')\n"
                      "cv.set('the job')\n"
                      "model = torch.nn.Linear(2, 1)\n"
                      "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                      "for step in range(3):\n"
                      "    opt.zero_grad()\n"
                      "    model(torch.ones(1, 2)).sum().backward()\n"
                      "    opt.step()\n")
    job = start_job("--break", "step==1", script=script)
    job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        assert c.evaluate("cv.get()")["value"] == "'the job'"
        c.close(then="end")
    job.proc.wait(WAIT)
