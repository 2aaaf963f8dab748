"""The tenth newcomer walk's 1 and 2 (issue 45), on `demos/nan_log.py` at its break, the TUI
under Pilot at 80x24 against the real job: a key typed in a text field never drives the job.

1. `e`, `los`, Tab (expecting completion, as `stepdbg attach --repl` completes): Tab moved
   the focus out of the line, onto the Break panel, and the next letter `s` stepped the job.
   Tab in the REPL line completes the name and the focus stays; in every other text field
   (the Tensor panel's name and slice, the Breaks panel's add box) Tab and shift+Tab go to
   another field, never to a panel; the LR dialog's Tab stays in the dialog.
2. The help said `3  Tensor: its name field takes what is typed, number keys too`, while
   after `3` keys act on the job (`step` stepped it, `loss` opened the LR dialog): the help
   says Tab types in the name field, and following it types there.

Each failed before its fix."""

from __future__ import annotations

from pathlib import Path

from conftest import wait_for
from test_tui_fixes import real
from textual.events import Key
from textual.widgets import Input
from tui_walk import screen_text, settled

from stepdbg.client.async_client import AsyncClient
from stepdbg_tui.dialogs import HelpScreen, LrScreen

NAN = Path(__file__).parent.parent / "demos" / "nan_log.py"


def where(status: dict) -> tuple:
    return status.get("state"), status.get("step"), status.get("phase")


async def job_where(app) -> tuple:
    """Where the job is, as its own record says (a second client)."""
    other = await AsyncClient.connect()
    try:
        return where(await other.status())
    finally:
        await other.close(then="stay")


async def at_break(app, pilot):
    await wait_for(pilot, lambda: app.status.get("state") == "paused", "the break")
    repl = app.query_one("#repl", Input)  # (the names Tab completes; before the fix, its suggester had them)
    await wait_for(pilot, lambda: repl.suggester is not None and "loss" in getattr(repl, "names", ["loss"]),
                   "the paused frame's names")
    await settled(pilot, app)


@real
async def test_tab_in_the_repl_line_completes_and_the_next_letter_is_typed_there(tui_at_break):
    async with tui_at_break("--break", "nan", script=NAN) as (app, pilot):
        await at_break(app, pilot)
        before = await job_where(app)
        repl = app.query_one("#repl", Input)
        await pilot.press("e", *"los", "tab")
        await settled(pilot, app)
        assert app.focused is repl and repl.value == "loss", (app.focused, repl.value)
        assert "tab complete" in screen_text(app).splitlines()[-1], screen_text(app)  # the footer says it
        await pilot.press("s")
        await settled(pilot, app)
        assert app.focused is repl and repl.value == "losss", (app.focused, repl.value)
        assert await job_where(app) == before
        # A name after other words completes too; several that begin so are said under the line.
        repl.value = ""
        await pilot.press(*"p lo", "tab")
        await settled(pilot, app)
        assert app.focused is repl and repl.value == "p lo", repl.value
        assert "Tab: locals, loss" in screen_text(app, skip=()), screen_text(app, skip=())
        await pilot.press("s", "tab")
        await settled(pilot, app)
        assert app.focused is repl and repl.value == "p loss", repl.value
        assert await job_where(app) == before


FIELDS = [("3", "#tensor-name"), ("b", "#break-input")]


@real
async def test_tab_and_shift_tab_in_a_text_field_go_to_another_field_never_to_a_panel(tui_at_break):
    async with tui_at_break("--break", "nan", script=NAN) as (app, pilot):
        await at_break(app, pilot)
        before = await job_where(app)
        for key, field in FIELDS:
            await pilot.press("escape", key)  # (3: its name field, since the twentieth walk's 1)
            await settled(pilot, app)
            assert app.focused is app.query_one(field), (key, app.focused)
            for tab in ["tab", "tab", "tab", "shift+tab", "shift+tab", "shift+tab", "shift+tab"]:
                await pilot.press(tab)
                await settled(pilot, app)
                assert isinstance(app.focused, Input), (key, tab, app.focused)
                if app.focused.id == "repl":  # (its Tab completes: shift+Tab leaves it)
                    await pilot.press("shift+tab")
                    await settled(pilot, app)
                    assert isinstance(app.focused, Input), (key, app.focused)
            await pilot.press(*"sn")
            await settled(pilot, app)
            assert await job_where(app) == before, key
        # The LR dialog: its Tab goes round the dialog (the field, the pin box, the button).
        await pilot.press("escape", "l")
        await settled(pilot, app)
        assert isinstance(app.screen, LrScreen)
        for _ in range(4):
            await pilot.press("tab", "s", "n")
            await settled(pilot, app)
            assert isinstance(app.screen, LrScreen) and await job_where(app) == before


@real
async def test_the_help_says_how_to_type_a_name_in_the_tensor_panel_and_following_it_types_there(tui_at_break):
    async with tui_at_break("--break", "nan", script=NAN) as (app, pilot):
        await at_break(app, pilot)
        before = await job_where(app)
        await pilot.press("escape", "question_mark")
        await settled(pilot, app)
        assert isinstance(app.screen, HelpScreen)
        help_words = " ".join(screen_text(app, skip=()).replace("█", " ").split())  # (its border's)
        assert "Tensor: typing goes to its name field (a digit to begin a name: that panel;" in help_words, \
            help_words  # (the twentieth walk's 1: 3 itself puts the focus there)
        await pilot.press("escape", "3", *"step")
        await settled(pilot, app)
        assert app.query_one("#tensor-name", Input).value == "step" and await job_where(app) == before


@real
async def test_letters_typed_at_once_after_e_go_to_the_repl_line(tui_at_break):
    """`e` then `los` arriving together (tmux's send-keys, a fast typist, a paste): `e` moved
    the focus on the app's next turn, after the letters had been read as keys: `l` opened
    the LR dialog (`s` would have stepped the job). The focus moves at once."""
    async with tui_at_break("--break", "nan", script=NAN) as (app, pilot):
        await at_break(app, pilot)
        before = await job_where(app)
        for ch in "elos":  # as the terminal's driver sends them (Pilot's press), in one burst: none waits
            key = Key(ch, ch)  # for the one before it to be handled
            key.set_sender(app)
            app._driver.send_message(key)
        await settled(pilot, app)
        assert len(app.screen_stack) == 1 and app.focused is app.query_one("#repl"), (app.screen_stack, app.focused)
        assert app.query_one("#repl", Input).value == "los" and await job_where(app) == before
