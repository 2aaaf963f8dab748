"""The TUI against a real agent: Pilot drives a served demo job in a subprocess, and
a real terminal (tmux) runs `stepdbg python demos/nan_log.py` end to end."""

from __future__ import annotations

import shutil
import sys

import pytest
from conftest import DEMOS, Tmux, marked_line, text_of, wait_for
from test_walk19_refusal_seen import wait_toast
from textual.widgets import DataTable, Input, TabbedContent

from stepdbg.client.async_client import AsyncClient
from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.dialogs import LrScreen, QuitScreen

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]


async def test_every_key_and_panel_against_a_real_agent(start_job):  # noqa: F811
    job = start_job("--break", "nan", script=DEMOS / "nan_log.py")
    job.info()
    client = await AsyncClient.connect()
    app = StepdbgApp(client)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.status.get("state") == "paused", "the break")
        assert app.status["paused"]["step"] == 30
        frames = lambda: text_of(app, "#break-frames")  # noqa: E731
        await wait_for(pilot, lambda: "> main()" in frames(), "main's frame")  # the stack and the locals of main()
        await wait_for(pilot, lambda: "float32 [64, 8] on cpu" in text_of(app, "#break-locals"), "main's locals")
        await pilot.press("u")
        await wait_for(pilot, lambda: "> <module>()" in frames(), "u: the caller")
        await pilot.press("d")
        await wait_for(pilot, lambda: "> main()" in frames(), "d: main again")
        await pilot.press("r")
        await wait_for(pilot, lambda: app.replay_result is not None, "the replay")
        first = app.replay_result["first_nonfinite"]
        assert (first["module"], first["op"], first["line"]) == ("features", "log",
                                                                  marked_line(DEMOS / "nan_log.py", "nan-here"))
        await pilot.press("2")
        await wait_for(pilot, lambda: app.query_one("#model-table", DataTable).row_count == 6, "the model's rows")
        await pilot.press("3")
        await wait_for(pilot, lambda: "loss" in str(app.query_one("#tensor-summary").content), "the summary of loss")
        await pilot.press("escape", "4")
        await wait_for(pilot, lambda: app.query_one("#opt-table", DataTable).row_count == 1, "the optimizer's row")
        # Each panel's content is the job's answer, waited for: after a fixed pause a busy
        # machine's job had not answered yet (an empty table, no threads).
        loaded = {"breakpoints": lambda: app.query_one("#breaks-table", DataTable).row_count == 1,
                  "threads": lambda: "MainThread" in str(app.query_one("#threads-text").content)}
        for key, pid in (("5", "memory"), ("6", "plots"), ("7", "breakpoints"), ("8", "threads"), ("9", "log")):
            await pilot.press(key)
            await wait_for(pilot, lambda pid=pid: app.query_one(TabbedContent).active == pid, f"panel {pid}")
            await wait_for(pilot, loaded.get(pid, lambda: True), f"panel {pid} loaded")
        await pilot.press("e", *"step", "enter")
        await wait_for(pilot, lambda: "30" in str(app.query_one("#repl-out").content), "step's value")
        await pilot.press("escape", "l")
        await wait_for(pilot, lambda: isinstance(app.screen, LrScreen), "the LR dialog")
        app.screen.query_one("#lr-value", Input).value = "0.001"
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, LrScreen), "the dialog closed")
        await wait_for(pilot, lambda: "LR set to 0.001" in text_of(app, "#break-record"), "the LR set, said")
        await pilot.press("n")  # next phase: after_backward of step 30
        await wait_for(pilot, lambda: (app.status.get("paused") or {}).get("phase") == "after_backward", "n: after_backward")
        await pilot.press("k")  # skip step 30's update
        await wait_for(pilot, lambda: "step 30's update will be skipped" in text_of(app, "#break-record"), "the skip")
        await pilot.press("s")  # next step: after_backward of step 31
        await wait_for(pilot, lambda: (app.status.get("paused") or {}).get("step") == 31, "s: step 31")
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), "the quit dialog")
        await pilot.press("c")
    assert app.return_value == "continue"
    await client.close(then="continue")
    code, out, err = job.finish()
    assert code == 0 and "done" in out
    changes = [e for e in job.events() if e["event"] == "change"]
    assert [c["what"] for c in changes] == ["lr", "skip"] and changes[0]["pinned"] is True


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_real_terminal_nan_demo_replay_lr_continue_quit(tmp_path, private_runtime_dir):  # noqa: F811
    """In tmux: the TUI comes up at the break, replay names the module, op and line, the
    LR is set, the job continues to its end, q quits, and the exit code is the job's."""
    # wide enough for the replay's line with the checkout's path in it, wherever the checkout lives
    term = Tmux(tmp_path, private_runtime_dir, f"{sys.executable} demos/nan_log.py", size=(200, 30))
    try:
        term.wait_screen("PAUSED [nan]")
        term.keys("r")
        # the whole answer, waited for (its first words can show before the panel has all of it)
        s = term.wait_screen(f"op log  line {DEMOS / 'nan_log.py'}:{marked_line(DEMOS / 'nan_log.py', 'nan-here')}")
        assert "module features (LogFeatures)" in s
        term.keys("l")
        term.wait_screen("learning rate for all groups")
        term.keys("0.001", "Enter")
        term.wait_screen("LR set to 0.001 and pinned")  # (the Break panel's line: the toast says what it does not)
        term.keys("c")
        term.wait_screen("job ended, exit code 0")
        term.keys("q")
        assert term.exit_code() == "0"
        after = term.screen()
        assert "done" in after and "step 20 loss" in after  # the job's output, on the terminal after the TUI
        # and no `listening; attach with: stepdbg attach N` of the job, relayed after its end (the closing walk's 27)
        assert "listening" not in after and "attach with" not in after, after
    finally:
        term.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_repl_in_a_real_terminal_with_completion(tmp_path, private_runtime_dir, start_job):  # noqa: F811
    """`stepdbg attach --repl`: p shows a tensor, Tab completes a name of the paused frame,
    c continues, the end of the job is shown and the REPL leaves with the job's exit code."""
    job = start_job("--break", "step==3", script_args=("--steps", "6", "--exit", "4"))
    job.info()
    term = Tmux(tmp_path, private_runtime_dir, "attach --repl", size=(100, 30), env=f"XDG_STATE_HOME={tmp_path}")
    try:
        term.wait_screen("paused at step 3")
        term.keys("p x", "Enter")
        term.wait_screen("x: float32 [8, 4] on cpu")
        term.keys("mod", "Tab")
        term.wait_screen("(stepdbg) model")
        term.keys("C-u", "c", "Enter")
        term.wait_screen("the job ended with exit code 4 after 6 steps")  # (the line console's words)
        assert term.exit_code() == "4", term.screen()
        assert (tmp_path / "stepdbg" / "repl_history").read_text().count("p x") == 1
    finally:
        term.close()
    assert job.finish()[0] == 4


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_leaving_the_attached_tui_says_what_became_of_the_job_and_ending_it_exits_with_its_code(
        tmp_path, private_runtime_dir, start_job):  # noqa: F811
    """`stepdbg attach` (the TUI) at 80x24: q, l leaves the job paused and says how to come
    back; attached again, q, e ends it: the job's exit code 3, said as the line console says
    it (the TUI printed nothing and exited 0)."""
    job = start_job("--break", "step==3", script_args=("--steps", "6"))
    info = job.info()
    for key, code, said in (("l", "0", f"detached; the job stays paused: `stepdbg attach {info.id}` comes back"),
                            ("e", "3", "the job ended with exit code 3")):
        (tmp_path / "exit").unlink(missing_ok=True)
        term = Tmux(tmp_path, private_runtime_dir, "attach", size=(80, 24))
        try:
            term.wait_screen("PAUSED")
            term.keys("q")
            term.wait_screen("What happens to the job?")
            term.keys(key)
            assert term.exit_code() == code, term.screen()
            term.wait_screen(said)
        finally:
            term.close()
    assert job.finish()[0] == 3



@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_attached_to_a_job_killed_by_kill_9_the_tui_says_it_is_gone_and_exits_1(
        tmp_path, private_runtime_dir, start_job):  # noqa: F811
    """`stepdbg attach` at 80x24, the job killed with kill -9: ctrl+r says it is gone, q
    leaves, and the attach says the job is gone, its exit code unknown, and exits 1 (issue
    45, item 1: after a reconnect to another job it printed that one's exit code 0 and
    exited 0; then it said only that the connection closed)."""
    job = start_job("--break", "step==3", script_args=("--steps", "6"))
    info = job.info()
    term = Tmux(tmp_path, private_runtime_dir, "attach", size=(80, 24))
    try:
        term.wait_screen("PAUSED")
        job.proc.kill()
        job.proc.wait()
        term.wait_screen("connection lost")  # (the header; the toast says what now: ctrl+r, q)
        term.keys("C-r")
        wait_toast(term, "nothing to reconnect to")  # (said, not tried: the closing walk's 11; its toast)
        term.keys("q")
        assert term.exit_code() == "1", term.screen()
        said = " ".join(term.wait_screen("exit code unknown").split())  # (the line wraps at 80 columns)
        assert f"the job (pid {info.pid}) is gone, its exit code unknown" in said, said
    finally:
        term.close()

SCRIPT = ("import time\nimport torch\nfrom torch import nn\n"
          "model = nn.Linear(2, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
          "try:\n"
          "    for step in range(100000):\n"
          "        model(torch.randn(4, 2)).sum().backward()\n"
          "        opt.step()\n        opt.zero_grad()\n        time.sleep(0.05)\n"
          "except KeyboardInterrupt:\n    print('Exiting from training early', flush=True)\n"
          "print('test evaluation done', flush=True)\n")  # handles Ctrl-C itself, then exits 0


def handling_job(tmp_path, runtime_dir) -> Tmux:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    return Tmux(tmp_path, runtime_dir, f"--break step==2 --report {tmp_path / 'r.jsonl'} {sys.executable} {script}")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_after_leaving_the_tui_ctrl_c_reaches_the_jobs_own_handling(tmp_path, private_runtime_dir):
    """In tmux: q, continue; stepdbg says the pid and how to attach again; Ctrl-C then runs
    the script's own KeyboardInterrupt handling (and its test evaluation), stepdbg prints
    no traceback of its own, the report has its end, and the exit code is the script's."""
    term = handling_job(tmp_path, private_runtime_dir)
    try:
        term.wait_screen("PAUSED [step==2]")
        term.keys("q")
        term.wait_screen("What happens to the job?")
        term.keys("c")
        term.wait_screen("the job goes on without the TUI (pid")
        assert "`stepdbg attach " in term.screen()
        term.keys("C-c")
        assert term.exit_code() == "0", term.screen()
        after = term.screen()
        assert "Exiting from training early" in after and "test evaluation done" in after
        assert "Traceback" not in after and "KeyboardInterrupt" not in after
        assert '"event": "end"' in (tmp_path / 'r.jsonl').read_text()
    finally:
        term.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_ctrl_c_in_the_tui_can_interrupt_the_paused_job(tmp_path, private_runtime_dir):
    """In tmux, paused: Ctrl-C asks; i interrupts the job as Ctrl-C at its terminal would.
    The pause ends, the script's own handling and test evaluation run, the TUI says the job
    ended with exit code 0, q closes it, and the report has its end."""
    term = handling_job(tmp_path, private_runtime_dir)
    try:
        term.wait_screen("PAUSED [step==2]")
        term.keys("C-c")
        term.wait_screen("Which do you mean?")
        term.keys("i")
        term.wait_screen("job ended, exit code 0")
        term.keys("q")
        assert term.exit_code() == "0", term.screen()
        after = term.screen()
        assert "Exiting from training early" in after and "test evaluation done" in after
        assert '"event": "end"' in (tmp_path / 'r.jsonl').read_text()
    finally:
        term.close()


BUFFERED = ("import torch\nfrom torch import nn\n"
            "model = nn.Linear(2, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "for step in range(6):\n"
            "    model(torch.randn(4, 2)).sum().backward()\n"
            "    opt.step()\n    opt.zero_grad()\n"
            "    print(f'printed at step {step}')\n")  # no flush: a pipe's stdout holds it


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_log_at_a_pause_has_what_the_job_printed_before_it(tmp_path, private_runtime_dir):
    """`stepdbg --break step==3 python train.py` at 80x24, the script printing without flush
    (PYTHONUNBUFFERED unset): at the pause the Log (9) shows the lines printed at steps 0-2
    (issue 45, item 8: the job's stdout, a pipe, held them until the job ended, so they came
    after the break and every line after it). (The order of a stdout line and a stderr line
    written a moment apart is the order two pipes deliver them in: not asserted.)"""
    script = tmp_path / "train.py"
    script.write_text(BUFFERED)
    term = Tmux(tmp_path, private_runtime_dir, f"--break step==3 {sys.executable} {script}", size=(80, 24),
                env="env -u PYTHONUNBUFFERED")
    try:
        term.wait_screen("PAUSED")
        term.keys("9")
        term.wait_screen("printed at step 2")  # (before the fix: only once the job ended)
        assert "printed at step 3" not in term.screen()
        term.keys("c")
        term.wait_screen("job ended, exit code 0")
        term.keys("q")
        assert term.exit_code() == "0", term.screen()
        after = [ln.strip() for ln in term.screen().splitlines()]
        assert after.index("printed at step 2") < after.index("printed at step 3"), after
    finally:
        term.close()
