"""Every key of the TUI, driven by Pilot against a fake source (STYLE.md 2, 10); the panels
are in test_tui_panels."""

from __future__ import annotations

import pytest
from conftest import text_of, wait_for
from fake_source import BREAK, HISTORY, REPLAY, FakeSource
from textual.widgets import Input, Label

from stepdbg.client.connection import ClientError
from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.asking import ask
from stepdbg_tui.break_panel import hints, render_break
from stepdbg_tui.dialogs import CtrlCScreen, HelpScreen, LrScreen, QuitScreen
from stepdbg_tui.panels import check_spec

pytestmark = pytest.mark.timeout(60)


async def started(size=(120, 40), paused=True):
    src = FakeSource(paused=paused)
    app = StepdbgApp(src, clock=lambda: 1754.0)
    return src, app, app.run_test(size=size)


async def test_resume_keys_call_the_agent():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.pause()
        for key, call in (("c", "cont"), ("n", "next_phase"), ("s", "next_step")):
            await pilot.press(key)
            await pilot.pause()
            assert src.calls[-1][0] == call
        await pilot.press("p")
        await pilot.pause()
        assert src.calls[-1][0] == "pause"
        await pilot.press("k")
        await pilot.pause()
        assert src.calls[-1][0] == "skip"
        await pilot.press("R")  # rewind: back to the newest snapshot (Memory panel lists them)
        await pilot.pause()
        assert src.calls[-1] == ("rewind", (None,))


async def test_resume_keys_are_refused_while_running():
    src, app, ctx = await started(paused=False)
    async with ctx as pilot:
        await pilot.pause()
        await pilot.press("c", "r")
        await pilot.pause()
        assert not any(c[0] in ("cont", "replay") for c in src.calls)
        assert "running" in text_of(app, "#break-record")


async def test_replay_shows_module_op_and_line_on_the_break_panel():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.pause()
        assert "press r to replay" in text_of(app, "#break-record")
        await pilot.press("r")
        await wait_for(pilot, lambda: "module features (LogFeatures)  op log  line /work/demos/nan_log.py:20"
                       in text_of(app, "#break-record"), "the replay's op on the Break panel")
        text = text_of(app, "#break-record")
        assert "return torch.log(x)" in text
        # The spinner on the Break panel says it is running; no toast stays on screen after it.
        assert not [n.message for n in app._notifications], "a toast outlived the replay"


async def test_set_lr_dialog_validates_then_sets_pinned():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.pause()
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, LrScreen)
        await pilot.press(*"abc", "enter")
        await pilot.pause()
        assert "not a learning rate" in text_of(app, "#lr-error")
        inp = app.screen.query_one("#lr-value", Input)
        inp.value = "1e5"  # one check for every front end and the agent: the dialog let this through
        await pilot.press("enter")
        await pilot.pause()
        assert "learning rate must be a finite number from 0 to 10000" in text_of(app, "#lr-error")
        assert not any(c[0] == "set_lr" for c in src.calls)
        inp.value = "1e-4"
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, LrScreen), "the dialog to close")
        await wait_for(pilot, lambda: ("set_lr", (1e-4, None, True)) in src.calls, "set_lr sent")
        src.push("change", {"what": "lr", "step": 30, "lr": 1e-4, "pinned": True, "groups": []})
        # the LR at the break, and the one set, which the next update uses (the panel kept the old one alone)
        await wait_for(pilot, lambda: "LR set to 0.0001 and pinned" in text_of(app, "#break-record"), "the LR set")
        said = text_of(app, "#break-record")
        assert f"lr {BREAK['scalars']['lr'][0]:.4g} " in said, said
        await pilot.press("l")  # the dialog's "now" is the LR set at this pause, not the one at the break
        await pilot.pause()
        assert "(now 0.0001)" in str(app.screen.query_one(Label).content)
        await pilot.press("escape")


async def test_quit_asks_what_happens_to_the_job():
    for key, choice in (("c", "continue"), ("l", "stay"), ("e", "end")):
        src, app, ctx = await started()
        async with ctx as pilot:
            await pilot.pause()
            await pilot.press("q")
            await pilot.pause()
            assert isinstance(app.screen, QuitScreen)
            await pilot.press(key)
            await pilot.pause()
        assert app.return_value == choice


async def test_quit_can_be_cancelled_and_help_opens():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.pause()
        await pilot.press("q", "escape")
        await pilot.pause()
        assert not isinstance(app.screen, QuitScreen) and app.is_running
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")


async def test_a_bad_value_is_refused_before_it_is_sent_or_as_the_agent_refuses_it():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.pause()
        await pilot.click("#repl")
        await pilot.press(*"lr 1e9", "enter")  # the LR's one check, before anything is sent
        await wait_for(pilot, lambda: "learning rate must be a finite number from 0 to 10000, not 1000000000.0"
                       in text_of(app, "#repl-out"), "the LR's refusal")
        assert not any(c[0] == "set_lr" for c in src.calls)
        await pilot.press(*"rewind 99999999999999999", "enter")  # the op's schema, as the agent checks it
        await wait_for(pilot, lambda: "rewind: step must be a whole number from 0 to" in text_of(app, "#repl-out"),
                       "the rewind's refusal, said under the line, where the answer goes")


async def test_repl_line_evaluates_with_history():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.press("e")
        await pilot.pause()
        await pilot.press(*"loss", "enter")
        await wait_for(pilot, lambda: "tensor(nan" in text_of(app, "#repl-out"), "loss's value")
        await pilot.press(*"raise x", "enter")
        await wait_for(pilot, lambda: "ValueError: boom" in text_of(app, "#repl-out"), "the raised error")
        await pilot.press("up", "up")
        assert app.query_one("#repl", Input).value == "loss"
        app.query_one("#repl", Input).value = ""
        await pilot.press(*"break add loss>5", "enter")  # an answer under the line, good or bad
        await wait_for(pilot, lambda: "breakpoint added: loss>5" in text_of(app, "#repl-out"),
                       "the add's answer")  # (the Log's and the console's words)
        await pilot.press(*"break add grad_norm>>1", "enter")
        await wait_for(pilot, lambda: check_spec("grad_norm>>1") in text_of(app, "#repl-out"), "the spec's error")
        await pilot.press("escape")  # keys are keys again, on the panel shown (walk 4's item 7: not on nothing)
        assert app.focused is not None and not isinstance(app.focused, Input), app.focused


async def test_ctrl_c_interrupts_code_running_from_the_repl_line():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.press("e")
        await pilot.press(*"while True: pass", "enter")
        await wait_for(pilot, lambda: src.evaluating is not None, "the endless eval to run")
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: "KeyboardInterrupt" in text_of(app, "#repl-out"), "the eval's interrupt")
        assert "interrupt" in [c[0] for c in src.calls]


async def test_ctrl_c_asks_interrupt_the_job_or_quit_the_ui():
    """Ctrl-C outside the REPL line asks: i interrupts the job (its own handling runs), q
    opens the quit dialog, escape goes back."""
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert isinstance(app.screen, CtrlCScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, CtrlCScreen) and "interrupt_job" not in [c[0] for c in src.calls]
        await pilot.press("ctrl+c", "i")
        await wait_for(pilot, lambda: ("interrupt_job", ()) in src.calls, "interrupt_job sent")
        assert [c[0] for c in src.calls].count("interrupt_job") == 1
        await pilot.press("ctrl+c", "q")
        await pilot.pause()
        assert isinstance(app.screen, QuitScreen)


async def test_u_and_d_walk_the_stack_and_the_break_panel_follows():
    """The Break panel lists the paused stack with the selected frame marked and that
    frame's locals; u selects the caller (its source and locals follow), d comes back."""
    src, app, ctx = await started()
    async with ctx as pilot:
        await wait_for(pilot, lambda: "> main()  nan_log.py:52" in text_of(app, "#break-frames"), "the stack")
        await wait_for(pilot, lambda: "float32 [64, 8] on cpu" in text_of(app, "#break-locals"), "main's locals")
        await pilot.press("u")
        await wait_for(pilot, lambda: "> <module>()  nan_log.py:67" in text_of(app, "#break-frames"), "the caller")
        await wait_for(pilot, lambda: "<function main" in text_of(app, "#break-locals"), "the caller's locals")
        await wait_for(pilot, lambda: "main()" in text_of(app, "#break-source"), "the caller's source")
        await pilot.press("e", *"d", "enter")
        await wait_for(pilot, lambda: "> main()" in text_of(app, "#repl-out"), "d's answer under the line")
        await wait_for(pilot, lambda: "> main()" in text_of(app, "#break-frames"), "main selected on the panel")


async def test_pushed_events_update_the_screen():
    src, app, ctx = await started(paused=False)
    async with ctx as pilot:
        await pilot.pause()
        src.push("step", HISTORY[5])
        src.push("output", [{"stream": "stdout", "lines": ["step 10 loss 21.17"]}])
        src.push("break", dict(BREAK))  # (the agent sends the break, then the pause)
        src.push("paused", dict(BREAK))
        await wait_for(pilot, lambda: app.status["state"] == "paused", "the pause")
        await wait_for(pilot, lambda: "step 30 · before_backward" in text_of(app, "#break-record"), "the break drawn")
        src.push("resumed", {"step": 30})
        await wait_for(pilot, lambda: app.status["state"] == "running", "the job going on")
        src.push("output", [{"stream": "stderr", "lines": ["stepdbg: change: lr lr=0.001", "a warning"]}])
        src.push("change", {"what": "lr", "step": 30, "lr": 0.001, "pinned": False})
        src.push("exited", {"exit_code": 0, "steps": 60})
        await wait_for(pilot, lambda: app.connection == "job ended, exit code 0", "the job's end")
        # the last of 60 steps, not the last status seen
        await wait_for(pilot, lambda: "step 59 · job ended, exit code 0" in text_of(app, "#header"), "the header's end")
        # Not "running — no break yet" after the end; a change is in the Log once, in words.
        await wait_for(pilot, lambda: text_of(app, "#break-record").startswith("the job ended (exit code 0)."),
                       "the end on the Break panel")
        await pilot.press("9")  # the Log draws its lines once shown
        await wait_for(pilot, lambda: "change at step 30: LR set to 0.001\n" in log_text(app)
                       and "paused at step 30 (before_backward)\n" in log_text(app), "the Log's lines")
        log = log_text(app)
        assert log.count("LR set to 0.001") == 1 and "change at step 30: LR set to 0.001\n" in log
        assert log.count("loss is nan") == 1 and "paused at step 30 (before_backward)\n" in log, log  # once
        await pilot.press("e", *"x.shape", "enter")  # said plainly, not "eval: Connection lost"
        await wait_for(pilot, lambda: "the job has ended (exit code 0): nothing runs in it now"
                       in text_of(app, "#repl-out"), "the line's answer after the end")
        assert ("eval", ("x.shape",)) not in src.calls
        await pilot.press("escape")
        await pilot.press("q")  # the job is gone: no question
        await pilot.pause()
    assert app.return_value is None


def test_hints_are_rules_over_the_record():
    assert any("press r" in h for h in hints(BREAK, None))
    assert any(h.startswith("domain: log met a value outside its domain") for h in hints(BREAK, REPLAY))
    grad = {**BREAK, "condition": "grad_norm>100", "reason": "gradient norm 250 is above 100", "details": {}}
    assert any("lower the LR" in h for h in hints(grad, None))
    assert render_break(None, None).plain.startswith("running")
    assert check_spec("grad_norm>100") is None and "needs a value" in check_spec("grad_norm")


async def test_a_lost_connection_is_shown_and_ctrl_r_reconnects():
    src = FakeSource()
    fresh = FakeSource()
    app = StepdbgApp(src, clock=lambda: 1754.0, reconnect=lambda: _ready(fresh))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        src.push("lost", "the ssh tunnel closed")
        await wait_for(pilot, lambda: app.connection.startswith("connection lost: the ssh tunnel closed"), "the loss")
        await pilot.press("c")  # said in words, not sent down a closed connection
        said = "not connected to the job (connection lost: the ssh tunnel closed): nothing to continue"
        await wait_for(pilot, lambda: any(said in str(n.message) for n in app._notifications), "c's refusal")  # (its toast:
        assert said not in text_of(app, "#repl-out")  # pressed on a panel, the eighteenth walk's leftovers 3)
        assert ("cont", ()) not in src.calls
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.connection == "connected" and app.source is fresh, "the reconnect")
        await wait_for(pilot, lambda: ("status", ()) in fresh.calls, "the new connection's status asked")


async def test_a_request_the_closed_connection_failed_is_not_its_own_error():
    """At the job's end the Break panel's requests in flight toasted `locals: the connection to
    the job closed` and `names: Connection lost` beside the end's own words: the app says a
    lost connection once, from its events. An agent's refusal is still the request's own."""
    said: list[str] = []

    class Where:
        def notify(self, message, **_):
            said.append(message)

    async def fails(e):
        raise e

    assert await ask(Where(), "names", fails(ConnectionResetError("Connection lost"))) is None
    assert await ask(Where(), "locals", fails(ConnectionError("the connection to the job closed"))) is None
    assert said == []
    await ask(Where(), "eval", fails(ClientError("bad_request", "no such name")))
    assert said == ["eval: no such name"]


def log_text(app) -> str:
    """The lines of the Log panel (drawn once it has been shown)."""
    return "\n".join(str(line.text) for line in app.query_one("LogPanel RichLog").lines)


async def _ready(source):
    return source


async def test_findings_appear_on_the_break_panel():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.pause()
        src.push("finding", {"rule": "stale_grad", "severity": "error", "step": 1,
                             "message": "the gradients of step 0 are still in .grad", "advice": "call zero_grad",
                             "data": {}})
        await wait_for(pilot, lambda: "finding [stale_grad] the gradients of step 0 are still in .grad — try: call "
                       "zero_grad" in text_of(app, "#break-record"), "the finding on the Break panel")
