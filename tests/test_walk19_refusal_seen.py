"""Issue 45's eighteenth walk's leftovers, 3: after `kill -9` of the job, `c` and ctrl+r
pressed on a panel were refused under the REPL line alone (since the seventeenth walk's 1
took their toast away), and the walker, looking at the panel, saw nothing. A key pressed on a
panel is refused in a toast, one at a time (the next refusal takes its place; pressed again,
still one), and not under the line; typed on the REPL line (its focus there), under the line,
where the person looks then, and no toast. A real job under Pilot at 80x24."""

from __future__ import annotations

import os
import signal

import pytest
from conftest import DEMOS, wait_for
from textual.widgets import Static
from tui_walk import plain, screen_text, settled

pytestmark = pytest.mark.timeout(300)


def toasts(app) -> list[str]:
    return [" ".join(str(n.message).split()) for n in app._notifications]


def under_the_line(app) -> str:
    return " ".join(plain(app.query_one("#repl-out", Static)).split())


def toasts_drawn(app) -> str:
    """The words of the toasts on screen: the rows right of their left edge (`▌`)."""
    return " ".join(" ".join(row.split("▌", 1)[1] for row in screen_text(app, skip=()).splitlines() if "▌" in row).split())


async def test_a_key_refused_on_a_panel_after_a_kill_is_said_in_one_toast(tui_at_break):
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py", notifications=True) as (app, pilot):
        app.reconnect = lambda: None  # (as `stepdbg attach` gives it)
        pid = app.source.session["pid"]
        os.kill(pid, signal.SIGKILL)
        await wait_for(pilot, lambda: app.gone is not None, "the job seen gone")
        await settled(pilot, app)
        assert app.focused is not app.query_one("#repl"), app.focused  # (on the Break panel)
        for key, what in (("c", "nothing to continue"), ("ctrl+r", "nothing to reconnect to"),
                          ("c", "nothing to continue"), ("c", "nothing to continue")):
            await pilot.press(key)
            await settled(pilot, app)
            refusals = [t for t in toasts(app) if "nothing to" in t]
            assert len(refusals) == 1 and what in refusals[0] and f"(pid {pid})" in refusals[0], toasts(app)
            assert "nothing to" not in under_the_line(app), under_the_line(app)
            assert f"{what}. The panels still show its last values; q quits" in toasts_drawn(app), toasts_drawn(app)
            assert len([t for t in toasts(app) if f"(pid {pid})" in t]) == 1, toasts(app)  # (the loss said in it)
        await pilot.press("e")  # the REPL line: what it is refused is said under it
        await settled(pilot, app)
        for n in list(app._notifications):
            app._unnotify(n)
        await pilot.press("ctrl+r")
        await settled(pilot, app)
        assert "nothing to reconnect to" in under_the_line(app), under_the_line(app)
        assert not [t for t in toasts(app) if "nothing to" in t], toasts(app)


def toast_words(screen: str) -> str:
    """The words right of a toast's left edge (`▌`) on a terminal's screen, its rows joined (a
    toast's words wrap at its width, beside the panel's rows)."""
    return " ".join(" ".join(row.rsplit("▌", 1)[-1] for row in screen.splitlines() if "▌" in row).split())


def wait_toast(term, words: str) -> str:
    """`term`'s screen once a toast on it says `words` (a guard against a hang, never a measure)."""
    import time

    from conftest import WAIT

    deadline = time.monotonic() + WAIT
    while words not in toast_words(shown := term.screen()):
        assert time.monotonic() < deadline, f"no toast said {words!r}; the screen:\n{shown}"
        time.sleep(0.1)
    return shown
