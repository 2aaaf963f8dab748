"""Toasts cover no panel line at 80x24 (issue 45, the twelfth walk's 4): under the tabs, a
toast covered the right of the panel's first lines: after `l 0.01 Enter` then `b`, the
Breaks table's `checked at` column; after Ctrl-C then `i`, the Break panel's end words
(`... handling ran; the Log (9) ha▌ Ctrl-C sent to the job: its own`). Toasts stand under
the REPL line now (tui/toasts.py's rule), over the footer's key hints. A real job, Pilot
at 80x24 with the toasts on, the screen read while a toast stands; failed before its fix."""

from __future__ import annotations

import functools
from typing import Any

from conftest import wait_for
from test_tui_fixes import real
from textual.widgets import Input
from textual.widgets._toast import Toast
from tui_walk import screen_text, settled

LONG = "expr:loss > 1000 and step > 100000"  # a spec that puts the `checked at` column right of the middle


def toasts(app: Any) -> list[Toast]:
    return list(app.screen.query(Toast))


def rows(app: Any) -> list[str]:
    return screen_text(app, skip=()).splitlines()


def under_the_repl_line(app: Any) -> bool:
    """Every toast drawn covers no line of the panel and stands below the REPL line's text row
    (over its box's lower border and the footer), all of it on the screen."""
    field, panel = app.query_one("#repl", Input).region, app.query_one("#panels").region
    return all(t.region.y > field.y + 1 and t.region.bottom <= app.size.height and not t.region.overlaps(panel)
               for t in toasts(app))


@real
async def test_the_lr_toast_leaves_the_breaks_tables_columns_in_sight(tui_at_break):
    async with functools.partial(tui_at_break, notifications=True)(
            "--break", "step==2", "--break", LONG, script_args=("--steps", "6"), size=(80, 24)) as (app, pilot):
        await settled(pilot, app)
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.focused, Input), "the LR dialog's field")
        await pilot.press(*"0.01", "enter")
        await wait_for(pilot, lambda: toasts(app), "the LR's toast")
        await pilot.press("b")
        await wait_for(pilot, lambda: any("checked at" in r for r in rows(app)) or not toasts(app),
                       "the Breaks table's header")
        assert toasts(app), "the toast went before the screen was read"
        assert any("spec" in r and "kind" in r and "checked at" in r for r in rows(app)), "\n".join(rows(app))
        row = next((r for r in rows(app) if LONG in r), "")  # its `checked at` reaches the right half
        assert row.split(LONG)[-1].split() == ["expr", "before_backward"], "\n".join(rows(app))
        assert under_the_repl_line(app), ([t.region for t in toasts(app)], app.query_one("#repl", Input).region)


@real
async def test_the_ctrl_c_toast_leaves_the_break_panels_end_words_whole(tui_at_break):
    async with functools.partial(tui_at_break, notifications=True)(
            "--break", "step==3", script_args=("--steps", "400", "--sleep", "0.05"), size=(80, 24)) as (app, pilot):
        await settled(pilot, app)
        await pilot.press("c")
        await settled(pilot, app)
        await pilot.press("ctrl+c")
        await settled(pilot, app)
        await pilot.press("i")
        await wait_for(pilot, lambda: str(app.status.get("state", "")).startswith("exited"), "the job's end")
        end = "after the Ctrl-C sent from this window (its Ctrl-C dialog): its own Ctrl-C handling ran"
        await wait_for(pilot, lambda: end in " ".join(" ".join(rows(app)).split()) or not toasts(app),
                       "the end words")
        assert toasts(app), "the toast went before the screen was read"
        said = " ".join(" ".join(rows(app)).replace("▌", " ").split())
        assert end in said, "\n".join(rows(app))
        assert under_the_repl_line(app), [t.region for t in toasts(app)]
