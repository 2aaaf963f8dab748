"""The TUI's items of issue 45, each looked at where the person looks (the screen under
Pilot), against the fake source or a real job; each failed before its fix."""

from __future__ import annotations

import pytest
from conftest import DEMOS, WAIT, text_of, wait_for
from fake_source import HISTORY, FakeSource
from test_tui_keys import started
from textual.widgets import DataTable, Input, TabbedContent
from tui_walk import EXCEPTION_WORDS, focus_is_visible, header_text, screen_text, settled

from stepdbg_tui.app import StepdbgApp


def no_exception_on_screen(app: StepdbgApp) -> None:
    text = screen_text(app)
    m = EXCEPTION_WORDS.search(text)
    assert m is None, f"{m.group(0)!r} on screen:\n{text}"


# ---------------------------------------------------------------------- item 5: stray keys


@pytest.mark.timeout(60)
async def test_keys_typed_after_adding_a_breakpoint_go_into_the_box_not_to_the_job():
    """b, a spec, Enter: the focus stays in the add box, so the next spec typed (`nan`, with
    its n) is a spec, never `n` stepping the job; escape puts the focus on the table."""
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await pilot.pause()
        await pilot.press("b", *"data_wait>2", "enter")
        await wait_for(pilot, lambda: ("break_add", ("data_wait>2",)) in src.calls, "the spec added")
        await pilot.press(*"nan")
        await wait_for(pilot, lambda: app.query_one("#break-input", Input).value == "nan", "nan in the box")
        assert not [c for c in src.calls if c[0] in ("next_phase", "cont", "next_step")], src.calls
        await pilot.press("escape")
        assert app.focused is app.query_one("#breaks-table", DataTable)


@pytest.mark.timeout(60)
async def test_a_break_that_comes_while_a_spec_is_typed_leaves_the_typing_in_the_box():
    """Typing in the Breaks panel's box when a break fires. It once went on into a box the
    break had hidden; then the Break panel was shown and the focus moved to it, and the rest
    of the typing ran as keys (the fourth walk's item 1: n stepped the job). A key typed in a
    field never reaches the job (issue 45's invariant a): the box keeps the focus, shown,
    and a toast says the pause; escape gives keys back, and c continues."""
    src, app, ctx = await started(size=(80, 24), paused=False)
    async with ctx as pilot:
        await pilot.pause()
        await pilot.press("b", *"los")
        await wait_for(pilot, lambda: app.query_one("#break-input", Input).value == "los", "los in the box")
        src.paused = dict(src.status_at_attach, **{"step": 30})
        from fake_source import BREAK

        src.push("break", dict(BREAK))
        src.push("paused", dict(BREAK))
        await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause")
        await pilot.press("c")
        assert app.query_one("#break-input", Input).value == "losc" and ("cont", ()) not in src.calls
        assert focus_is_visible(app) and app.query_one(TabbedContent).active == "breakpoints"
        await pilot.press("escape", "c")
        await wait_for(pilot, lambda: ("cont", ()) in src.calls, "c to continue the job")


# ---------------------------------------------------------------------- item 6: Tensor and Model panels


@pytest.mark.timeout(60)
async def test_the_tensor_panel_takes_typing_and_the_model_panel_says_a_module_has_no_parameters():
    """3: what is typed is a name (it went nowhere). Model → Enter on head.1 (ReLU) says it
    has no parameters (it showed `next(...): NoneType None`); on (root) the summary is
    labelled with the module, not the expression; back on Model, the cursor is where it was."""
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await pilot.pause()
        await pilot.press("3", *"x")
        await wait_for(pilot, lambda: app.focused is app.query_one("#tensor-name", Input)
                       and app.focused.value.endswith("x"), "x typed into the name")
        await pilot.press("escape", "2")
        await wait_for(pilot, lambda: app.query_one("#model-table", DataTable).row_count == 6, "the modules")
        app.query_one("#model-table", DataTable).move_cursor(row=4)  # head.1 ReLU
        await pilot.press("enter")
        await wait_for(pilot, lambda: "head.1" in text_of(app, "#tensor-summary"), "the summary")
        assert "head.1 (ReLU) has no parameters" in text_of(app, "#tensor-summary")
        no_exception_on_screen(app)
        assert "None" not in text_of(app, "#tensor-summary")
        assert not isinstance(app.focused, Input)  # keys are keys: 2 goes back to the Model panel
        await pilot.press("2")
        await wait_for(pilot, lambda: app.query_one(TabbedContent).active == "model", "the Model panel")
        await settled(pilot, app)  # its modules loaded again
        assert app.query_one("#model-table", DataTable).cursor_row == 4
        app.query_one("#model-table", DataTable).move_cursor(row=0)
        await pilot.press("enter")
        await wait_for(pilot, lambda: "(root)" in text_of(app, "#tensor-summary"), "the root's summary")
        assert "(root) (Net): its first parameter" in text_of(app, "#tensor-summary")
        assert "next((" not in text_of(app, "#tensor-summary")


@pytest.mark.timeout(60)
async def test_a_loss_not_yet_computed_is_said_in_words(monkeypatch):
    """Paused before the forward, the loss is None: 3 says `loss is None here` (the walk's
    seeds 7 and 8 found `loss: NoneType None` on screen)."""
    import fake_source

    monkeypatch.setitem(fake_source.ANSWERS, "summary", lambda src, name: {"name": name, "type": "NoneType",
                                                                           "repr": "None"})
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await pilot.pause()
        await pilot.press("3")
        await wait_for(pilot, lambda: "loss" in text_of(app, "#tensor-summary"), "the loss")
        assert "loss is None here: no tensor to show yet" in text_of(app, "#tensor-summary")
        no_exception_on_screen(app)


# ---------------------------------------------------------------------- item 7: the step never goes back


@pytest.mark.timeout(60)
async def test_a_job_interrupted_at_a_pause_ends_at_the_step_it_was_paused_at():
    """Paused at step 30, then interrupted (the agent's end counts 30 steps: 0 to 29 ran to
    their end): the header says step 30 · job ended (it said step 29)."""
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await pilot.pause()
        src.push("exited", {"exit_code": 130, "steps": 30})
        await wait_for(pilot, lambda: "ended" in header_text(app), "the end")
        assert "step 30 · job ended, exit code 130" in header_text(app), header_text(app)


# ---------------------------------------------------------------------- item 9: 80x24


@pytest.mark.timeout(60)
async def test_a_spec_error_is_read_whole_at_80x24():
    """A bad spec typed in the Breaks panel at 80x24: its error wraps and is on screen to its
    last word (it was cut at `known: nan, inf, no`)."""
    from stepdbg_tui.panels import check_spec

    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await pilot.pause()
        await pilot.press("b", *"foo>1")
        said = " ".join(check_spec("foo>1").split())
        await wait_for(pilot, lambda: said in " ".join(screen_text(app).split()).replace("- ", "-"), "the error")


@pytest.mark.timeout(60)
async def test_brackets_typed_in_a_field_are_shown_not_read_as_markup():
    """A spec, a REPL line and an LR with `[` and `=` in them: each answer shows what was
    typed (the walk's seeds 10 and 13: a spec `model[0].weight`… raised MarkupError in the
    Breaks panel and ended the TUI)."""
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await pilot.pause()
        await pilot.press("b", *"model[0].weight>2")
        await wait_for(pilot, lambda: "model[0].weight>2" in text_of(app, "#break-error"), "the spec's error")
        await pilot.press("escape", "e", *"lr[a=1]", "enter")
        await wait_for(pilot, lambda: "» lr[a=1]" in text_of(app, "#repl-out"), "the REPL's answer")
        await pilot.press("escape", "l", *"[b=2", "enter")
        await wait_for(pilot, lambda: app.screen.query("#lr-error")
                       and "[b=2" in str(app.screen.query_one("#lr-error").render()), "the LR's error")
        assert app.is_running


# ---------------------------------------------------------------------- item 2: plots equal the history


@pytest.mark.timeout(60)
async def test_a_series_of_one_point_is_drawn_not_an_error():
    """A grad norm read at one step only: the plot draws it (it said `ZeroDivisionError`)."""
    src, app, ctx = await started(size=(80, 24), paused=False)
    async with ctx as pilot:
        await pilot.pause()
        src.push("step", {**HISTORY[0], "earlier": []})
        await wait_for(pilot, lambda: len(app.history) == 1, "the step")
        app.history = [{"step": 0, "grad_norm": 1.5}]
        await pilot.press("6")
        await wait_for(pilot, lambda: "grad norm: step 0, 1.5" in text_of(app, "#plot-grad_norm-label"), "the plot")
        no_exception_on_screen(app)


@pytest.mark.timeout(60)
async def test_step_events_carry_every_step_and_a_late_one_does_not_hide_the_end():
    """Step events that come together (each with the records since the one before) leave
    every step in the history, in order, and the Plots say steps 0–29."""
    src, app, ctx = await started(size=(80, 24), paused=False)
    async with ctx as pilot:
        await pilot.pause()
        for first in range(0, 30, 10):
            chunk = HISTORY[first:first + 10]
            src.push("step", {**chunk[-1], "earlier": chunk[:-1]})
        await wait_for(pilot, lambda: len(app.history) >= 30, "the 30 steps")
        assert [h["step"] for h in app.history] == list(range(30))
        await pilot.press("6")
        await wait_for(pilot, lambda: text_of(app, "#plot-loss-label").startswith("loss: steps 0–29"), "the plot")


# ---------------------------------------------------------------------- item 1: reconnect


@pytest.mark.timeout(60)
async def test_ctrl_r_never_attaches_another_job():
    """The job is gone and the only session left is another job's: ctrl+r says the job is
    gone and stays off the other one (it said `reconnected` to it)."""
    src, other = FakeSource(), FakeSource()
    other.session = {**other.session, "id": "5151", "pid": 5151}

    async def reconnect():
        return other

    app = StepdbgApp(src, clock=lambda: 1754.0, reconnect=reconnect)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        src.push("lost", "the connection to the job closed")
        await wait_for(pilot, lambda: app.connection.startswith("connection lost"), "the connection lost")
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: any("is gone" in n.message for n in app._notifications), "ctrl+r's answer")
        said = [n.message for n in app._notifications]
        assert app.source is src and app.connection.startswith("connection lost")
        assert any("the job (pid 4242) is gone: not attaching to another one (pid 5151)" in m for m in said), said
        assert ("close", ("stay",)) in other.calls and not [c for c in other.calls if c[0] != "close"]


# ---------------------------------------------------------------------- real jobs: items 3, 4, 2

def real(test):
    """A test against a real job: in its own session directory, slow (a job starts)."""
    for mark in (pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(WAIT * 2)):
        test = mark(test)
    return test


@pytest.mark.parametrize("row", ["head.0.weight", "opt.state[head.0.weight].exp_avg", "in loss's graph"])
@real
async def test_enter_on_a_memory_row_opens_its_summary(tui_at_break, row):
    """nan_log at its break, Memory (5), Enter on a parameter, an optimizer state, a tensor
    saved in loss's graph: the Tensor panel shows it with its dtype and shape (it said
    `LookupError: cannot evaluate 'head.0.weight': SyntaxError`)."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        await pilot.press("5")
        table = app.query_one("#mem-largest", DataTable)
        await wait_for(pilot, lambda: table.row_count > 0, "the largest tensors")
        names = [str(k.value) for k in table.rows]
        name = next(n for n in names if row in n)
        table.move_cursor(row=names.index(name))
        await pilot.press("enter")
        await wait_for(pilot, lambda: name in text_of(app, "#tensor-summary"), "the summary")
        await wait_for(pilot, lambda: "values: " in text_of(app, "#tensor-slice"), "the values")
        assert "float32 [" in text_of(app, "#tensor-summary")
        no_exception_on_screen(app)


@real
async def test_a_breakpoint_removed_and_added_again_fires_again(tui_at_break):
    """loss>0 holds at every step: paused at step 0, removed (delete on its row), added again
    (b, the spec, Enter), c: the job pauses at step 1 (it ran to its end: a repeat)."""
    async with tui_at_break("--break", "loss>0", script_args=("--steps", "20")) as (app, pilot):
        assert (app.status.get("paused") or {}).get("step") == 0, app.status
        await pilot.press("7")  # (7: the table has the focus)
        table = app.query_one("#breaks-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 1, "the breakpoint")
        await pilot.press("delete")
        await wait_for(pilot, lambda: table.row_count == 0, "the breakpoint removed")
        await pilot.press("b", *"loss>0", "enter")
        await wait_for(pilot, lambda: table.row_count == 1, "the breakpoint added again")
        await pilot.press("escape", "c")
        await wait_for(pilot, lambda: "PAUSED" in header_text(app) and "step 0 · " not in header_text(app)
                       or "ended" in header_text(app), "a pause after step 0, or the end")
        assert "step 1 · " in header_text(app) and "PAUSED [loss>0]" in header_text(app), header_text(app)
