"""Issue 45's seventeenth walk (a newcomer, 80x24): the TUI's words after a job's end or loss,
and small repeats. Each test looks where the person looks (the screen drawn, the toasts raised)
and failed before its fix.

1. c, ctrl+r and r after the end (or kill -9): the line under the REPL box and a toast said the
   same words, the toast over the REPL box and the footer; pressed again, more copies.
2. kill -9 of an attached job: the Log said only `connection lost: ...`, and the Break panel
   still said `• press r to replay`.
3. d d at the innermost frame: two identical toasts.
4. A wrapped bullet of the Break panel went on under its bullet, not under its words.
5. `save` on the REPL line said it was the console's: it saves, and says the bundle's path."""

from __future__ import annotations

import os
import signal

from conftest import DEMOS, wait_for
from test_tui_fixes import real
from textual.widgets import RichLog, Static
from tui_walk import plain, screen_text, settled


def toasts(app) -> list[str]:
    return [str(n.message) for n in app.raised]


def under_the_line(app) -> str:
    return " ".join(plain(app.query_one("#repl-out", Static)).split())


def log_text(app) -> str:
    return "\n".join(strip.text for strip in app.query_one("LogPanel RichLog", RichLog).lines)


def break_panel(app) -> str:
    return plain(app.query_one("#break-record", Static))


@real
async def test_a_refusal_after_the_end_is_said_once_in_a_toast(tui_at_break):
    """Pressed on a panel, in one toast, never under the REPL line too (the eighteenth walk's
    leftovers 3: under the line alone, the walker looking at the panel saw nothing)."""
    async with tui_at_break("--break", "step==1", script_args=("--steps", "3"), notifications=True) as (app, pilot):
        app.reconnect = lambda: None  # (as `stepdbg attach` gives it: ctrl+r says nothing to reconnect to)
        app.action_cont()
        await wait_for(pilot, lambda: str(app.status.get("state")).startswith("exited"), "the end")
        await settled(pilot, app)
        app.raised.clear()
        for key, what in (("c", "continue"), ("c", "continue"), ("r", "replay"), ("ctrl+r", "reconnect to")):
            await pilot.press(key)
            await settled(pilot, app)
            said = f"the job has ended (exit code 0): nothing to {what}. The panels still show its last values; q quits"
            assert [str(n.message) for n in app._notifications if "nothing to" in str(n.message)] == [said], toasts(app)
            assert "nothing to" not in under_the_line(app), under_the_line(app)


@real
async def test_a_job_killed_is_said_gone_in_the_log_and_the_break_panel_invites_no_key(tui_at_break):
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py", notifications=True) as (app, pilot):
        await wait_for(pilot, lambda: "press r to replay" in break_panel(app), "the break's hint")
        pid = app.source.session["pid"]
        os.kill(pid, signal.SIGKILL)
        await wait_for(pilot, lambda: app.gone is not None, "the job seen gone")
        await settled(pilot, app)
        assert "press r" not in break_panel(app) and "step 30" in break_panel(app), break_panel(app)
        await pilot.press("9")
        await settled(pilot, app)
        assert f"the job (pid {pid}) is gone" in log_text(app), log_text(app)
        await pilot.press("c")
        await settled(pilot, app)  # (pressed on a panel: its toast, which says the job gone, the loss's gone)
        assert [str(n.message) for n in app._notifications] == [t for t in toasts(app) if "nothing to continue" in t], \
            toasts(app)


@real
async def test_the_break_panel_after_a_normal_end_invites_no_key(tui_at_break):
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py", script_args=("--steps", "32")) as (
            app, pilot):
        await wait_for(pilot, lambda: "press r to replay" in break_panel(app), "the break's hint")
        app.action_cont()
        await wait_for(pilot, lambda: str(app.status.get("state")).startswith("exited"), "the end")
        await settled(pilot, app)
        assert "press r" not in break_panel(app) and "ended" in break_panel(app), break_panel(app)


@real
async def test_d_twice_at_the_innermost_frame_says_it_once(tui_at_break):
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py", notifications=True) as (app, pilot):
        await settled(pilot, app)
        app.action_frame(-1)  # (d d typed at once: both answers come before either toast is shown)
        app.action_frame(-1)
        await settled(pilot, app)
        said = [t for t in app._notifications if "d goes no further" in str(t.message)]
        assert len(said) == 1, [str(t.message) for t in app._notifications]


@real
async def test_a_wrapped_bullet_of_the_break_panel_goes_on_under_its_words(tui_at_break):
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        await wait_for(pilot, lambda: "press r to replay" in break_panel(app), "the break's hint")
        await settled(pilot, app)
        rows = screen_text(app).splitlines()
        at = next(i for i, row in enumerate(rows) if row.startswith("• press r"))
        assert rows[at + 1].startswith("  ") and rows[at + 1].strip(), "\n".join(rows[at:at + 2])


@real
async def test_save_on_the_repl_line_saves_the_bundle_and_says_its_path(tui_at_break, tmp_path):
    async with tui_at_break("--break", "step==2", "--bundle-dir", str(tmp_path)) as (app, pilot):
        await pilot.press("e", *"save", "enter")
        await wait_for(pilot, lambda: "evidence bundle" in under_the_line(app), "save's answer")
        await settled(pilot, app)
        bundle = tmp_path / "stepdbg-step2"
        assert f"evidence bundle: {bundle}" in under_the_line(app) and bundle.is_dir(), under_the_line(app)
        await pilot.press("escape", "question_mark", "pagedown", "pagedown", "pagedown")  # (the help's last lines)
        await settled(pilot, app)
        assert "  save  " in screen_text(app, skip=()), screen_text(app, skip=())
