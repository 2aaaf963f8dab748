"""Issue 45's nineteenth newcomer walk, 3 and 4: the Breaks panel (7) once no change reaches
the job. A real job under Pilot at 80x24, looked at where the person looks (the screen drawn).

3. After the job's end the footer still offered `⏎ add it` under the add box (its placeholder
   said no spec is added): the footer offers no Enter there after the end, nor once it is gone.
4. After kill -9 of the job, the panel never opened: no rows, under the hint `its breakpoints
   as they were`. It says it never read them, and names those the job's last status named."""

from __future__ import annotations

import os
import signal

import pytest
from conftest import wait_for
from textual.widgets import Input
from tui_walk import screen_text, settled

pytestmark = pytest.mark.timeout(300)


def shown(app) -> str:
    return " ".join(screen_text(app, skip=()).split())


def footer(app) -> str:
    return " ".join(screen_text(app, skip=()).splitlines()[-1].split())


async def test_the_footer_offers_no_add_under_the_breaks_box_after_the_end(tui_at_break):
    async with tui_at_break("--break", "step==2", script_args=("--steps", "5")) as (app, pilot):
        await pilot.press("b")
        await settled(pilot, app)
        box = app.query_one("#break-input", Input)
        assert app.focused is box and "add it" in footer(app), footer(app)
        await app.source.call("cont")  # (another client's c: the box keeps the focus to the end)
        await wait_for(pilot, lambda: str(app.status.get("state", "")).startswith("exited"), "the job's end")
        await settled(pilot, app)
        assert app.focused is box, app.focused
        assert "the job has ended: no spec typed here is added" in shown(app), shown(app)
        assert "add it" not in footer(app) and "esc the table" in footer(app), footer(app)


async def test_the_footer_offers_no_add_under_the_breaks_box_once_the_job_is_gone(tui_at_break):
    async with tui_at_break("--break", "step==2", script_args=("--steps", "5")) as (app, pilot):
        os.kill(app.source.session["pid"], signal.SIGKILL)
        await wait_for(pilot, lambda: app.gone is not None, "the job seen gone")
        await pilot.press("7", "tab")
        await settled(pilot, app)
        assert app.focused is app.query_one("#break-input", Input), app.focused
        assert "add it" not in footer(app) and "esc the table" in footer(app), footer(app)


async def test_gone_before_the_breaks_panel_was_shown_it_says_it_never_read_them(tui_at_break):
    async with tui_at_break("--break", "step==2", "--break", "nan", script_args=("--steps", "5")) as (app, pilot):
        pid = app.source.session["pid"]
        os.kill(pid, signal.SIGKILL)
        await wait_for(pilot, lambda: app.gone is not None, "the job seen gone")
        await pilot.press("7")
        await settled(pilot, app)
        words = shown(app)
        assert "its breakpoints as they were" not in words, words
        assert f"the job (pid {pid}) is gone before this panel read its breakpoints " \
               "(its last status named: step==2, nan); they take no change now (q quits)" in words, words
