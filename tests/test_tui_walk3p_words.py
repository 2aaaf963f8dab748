"""Words on screen the third newcomer's walk met (issue 45, items 4, 5, 13-14, 17): the TUI
under Pilot at 80x24, attached to a real job of its own (conftest's tui_at_break); each
failed before its fix. Nothing on screen is a Python exception's text."""

from __future__ import annotations

from conftest import DEMOS, text_of, wait_for
from test_tui_fixes import real
from textual.widgets import Input
from tui_walk import EXCEPTION_WORDS, screen_text, settled


def no_exception_text(words: str) -> None:
    m = EXCEPTION_WORDS.search(words)
    assert m is None and "KeyboardInterrupt" not in words and "Attribute is" not in words, words


@real
async def test_a_refused_spec_is_said_in_words_quoting_what_was_typed(tui_at_break):
    """b, then specs typed in the Breaks panel's box: `expr:loss.item > 1` said `Attribute is
    not allowed in a condition`; `mem>12xB` quoted `'12xb'` (item 4, 17)."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        box = app.query_one("#break-input", Input)
        await pilot.press("b", *"expr:loss.item > 1")
        await settled(pilot, app)
        said = text_of(app, "#break-error")
        assert "'loss.item' is not allowed" in said and "write loss alone" in said, said
        no_exception_text(said)
        box.value = ""
        await pilot.press(*"mem>12xB")
        await settled(pilot, app)
        assert "'12xB' is not a size" in text_of(app, "#break-error"), text_of(app, "#break-error")


@real
async def test_ctrl_c_on_a_repl_line_stops_it_in_words_and_the_job_stays_paused(tui_at_break):
    """e, `import time; time.sleep(30)`, Enter, ctrl+c: the answer under the line was a KeyboardInterrupt
    traceback through stepdbg/agent/views/evaluate.py (item 4). Now it says the line was
    interrupted and did not finish, and the job is still paused at its step, and answers the next line."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        step = app.status["paused"]["step"]
        await pilot.press("e", *"import time; time.sleep(30)", "enter")
        await wait_for(pilot, lambda: app.evaluating, "the line running")
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: "did not finish" in text_of(app, "#repl-out"), "the answer")
        said = text_of(app, "#repl-out")
        no_exception_text(said)
        assert "evaluate.py" not in said and "still paused" in said, said
        await pilot.press(*"1 + 1", "enter")
        await wait_for(pilot, lambda: text_of(app, "#repl-out").strip().endswith("2"), "the next answer")
        assert app.status["state"] == "paused" and app.status["paused"]["step"] == step, app.status


@real
async def test_the_tensor_panel_takes_the_names_the_model_panel_shows(tui_at_break):
    """3, then `model.head.0.weight` (the Model panel's dotted name), `head.0.weight` and
    `features` (a module's row): each said `not an expression` or `no variable` (item 5)."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        await pilot.press("3")  # (3: the panel, its name field the focus)
        await wait_for(pilot, lambda: "loss" in text_of(app, "#tensor-summary"), "the loss")

        async def ask(name: str, expect: str) -> str:
            await pilot.press("escape", "3", *name, "enter")
            await wait_for(pilot, lambda: expect in text_of(app, "#tensor-summary"), f"{name}: {expect}")
            await settled(pilot, app)
            return screen_text(app)

        for name in ("model.head.0.weight", "head.0.weight"):
            shown = await ask(name, "float32 [32, 8]")
            assert text_of(app, "#tensor-summary").startswith(name) and "values: " in shown, shown
        shown = await ask("head", "head.0.weight (head's first parameter)")
        shown = await ask("features", "features is a module (LogFeatures) with no parameters")
        no_exception_text(shown)


@real
async def test_a_refused_slice_is_said_and_the_last_good_one_stays(tui_at_break):
    """3, a weight, slice `0, :4`, then slice `99`: torch's `index 99 is out of bounds` was
    toasted and the field kept `99` over values of another slice (items 4, 13-14). Now the
    panel says the slice was refused, in words, and the field and values are the last good
    slice's. At 80 columns the fields' words are whole."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        await pilot.press("3")
        await wait_for(pilot, lambda: "loss" in text_of(app, "#tensor-summary"), "the loss")
        await settled(pilot, app)
        app.query_one("#tensor-name", Input).value = ""
        await settled(pilot, app)
        shown = screen_text(app)  # the fields' placeholders: `tensor: loss, batch, x,` was cut there
        assert "tensor: loss, batch, x, model.head[0].weight.grad" in shown and "slice, e.g. 0, :8" in shown, shown
        await pilot.press(*"model.head[0].weight", "tab", *"0, :4", "enter")
        await wait_for(pilot, lambda: text_of(app, "#tensor-slice").splitlines()[0].count(",") == 3, "4 values")
        good = text_of(app, "#tensor-slice").splitlines()[0]  # (under it: the slice they are at)
        index = app.query_one("#tensor-index", Input)
        index.value = ""
        await pilot.press(*"99", "enter")
        await wait_for(pilot, lambda: "refused" in screen_text(app), "the refusal")
        await settled(pilot, app)
        shown = screen_text(app)
        no_exception_text(shown)
        assert "out of bounds" not in shown and "dimension 0 takes 0 to 31" in shown, shown
        said = text_of(app, "#tensor-refused")  # (under the box: the eighteenth walk's 1)
        assert said.startswith("refused: the slice '99' does not fit") and "values below are at '0, :4'" in said, said
        values = text_of(app, "#tensor-slice")
        assert index.value == "0, :4" and values.splitlines()[-1] == good.strip(), (index.value, values, good)
