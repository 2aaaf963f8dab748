"""Toasts and the header at 80x24, after the ninth newcomer walk (issue 45). The rule
(tui/toasts.py): a toast stands at most TOAST_SECONDS whatever its caller asks, is drawn
without blank rows, and says nothing that must stay or is said elsewhere on screen; a long
answer goes under the REPL line and in the Log. Before: D's answer stood 30 s in a toast of
5 rows over the Break panel's first lines; Ctrl-C then i's toast covered the Break panel's
end words with 4 rows; after a kill -9 the header read `connection lost: the connection to
t…` beside a toast that said `the connection to the job` twice, 10 s. The TUI under Pilot
(toasts on, as a person sees them) attached to a real job at 80x24; each failed before."""

from __future__ import annotations

import functools
import os
import signal
from typing import Any

import pytest
from conftest import wait_for
from test_tui_fixes import real
from textual.notifications import Notification
from textual.widgets import RichLog
from textual.widgets._toast import Toast
from tui_walk import header_text, screen_text, settled

from stepdbg_tui.header import render_header
from stepdbg_tui.toasts import TOAST_SECONDS

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def toasting_tui(tui_at_break: Any) -> Any:
    """conftest's tui_at_break with the toasts on (run_test leaves them off), and every toast
    raised kept in `app.raised`."""
    return functools.partial(tui_at_break, notifications=True)


def toasts(app: Any) -> list[Toast]:
    return list(app.screen.query(Toast))


async def rule_kept(app: Any, pilot: Any) -> None:
    """Every toast raised stood TOAST_SECONDS at most; each one drawn covers only the rows of
    its words (no blank row above or under them); then they go, and nothing is left over the panel."""
    for toast in toasts(app):
        rows = [strip.text for strip in toast.render_lines(toast.region.reset_offset)]
        assert all(r.strip(" ▌") for r in rows), (toast.region, rows)
    long = [(str(n.message), n.timeout) for n in app.raised if n.timeout > TOAST_SECONDS]
    assert not long, long
    await wait_for(pilot, lambda: not toasts(app), "the toasts to go")
    await settled(pilot, app)


def words(app: Any) -> str:
    return " ".join(screen_text(app, skip=()).split())


def log_text(app: Any) -> str:
    return " ".join(" ".join(str(line.text) for line in app.query_one("LogPanel RichLog", RichLog).lines).split())


@real
async def test_ds_answer_is_said_under_the_repl_line_and_in_the_log_not_in_a_long_toast(toasting_tui):
    async with toasting_tui("--break", "step==3", script_args=("--steps", "40")) as (app, pilot):
        await settled(pilot, app)
        before = screen_text(app, skip=()).splitlines()
        await pilot.press("D")
        answer = "diff: step 3 run twice from the same state gives the same module outputs"
        await wait_for(pilot, lambda: answer in words(app), "the diff's answer on screen")
        await settled(pilot, app)
        shown = screen_text(app, skip=()).splitlines()
        at = app.query_one("#repl-out").region.y  # under the REPL line's answer place, where it stays
        assert answer in " ".join(" ".join(shown[at:at + 3]).split()), "\n".join(shown)
        await rule_kept(app, pilot)
        now = screen_text(app, skip=()).splitlines()
        assert now[3:6] == before[3:6], "\n".join(now)  # the Break panel's first lines, whole
        assert answer in words(app), "\n".join(now)  # the answer stays
        await pilot.press("9")
        await wait_for(pilot, lambda: answer in log_text(app), "the diff's answer in the Log")


@real
async def test_ctrl_c_then_i_leaves_the_break_panels_end_words_whole_within_seconds(toasting_tui):
    async with toasting_tui("--break", "step==3", script_args=("--steps", "400", "--sleep", "0.05")) as (app, pilot):
        await settled(pilot, app)
        await pilot.press("c")
        await settled(pilot, app)
        await pilot.press("ctrl+c")
        await settled(pilot, app)
        await pilot.press("i")
        await wait_for(pilot, lambda: str(app.status.get("state", "")).startswith("exited"), "the job's end")
        await settled(pilot, app)
        await wait_for(pilot, lambda: toasts(app), "the toast of the Ctrl-C")
        await rule_kept(app, pilot)
        assert "after the Ctrl-C sent from this window (its Ctrl-C dialog): its own Ctrl-C handling ran" in words(app), words(app)


@real
async def test_after_kill_9_the_header_fits_and_the_toast_says_what_now_not_the_headers_words(toasting_tui):
    async with toasting_tui("--break", "step==3", script_args=("--steps", "40")) as (app, pilot):
        await settled(pilot, app)
        os.kill(app.source.session["pid"], signal.SIGKILL)
        await wait_for(pilot, lambda: app.connection != "connected", "the connection's loss")
        await wait_for(pilot, lambda: toasts(app), "the toast of the loss")
        await settled(pilot, app)
        pid = app.source.session["pid"]
        # (the job, local, is known gone: 9980f98 says so, and offers no ctrl+r)
        await wait_for(pilot, lambda: "gone" in screen_text(app, skip=()).splitlines()[0], "the header's 'gone'")
        top = screen_text(app, skip=()).splitlines()[0]
        # (whole from the step on; the script's arguments may be cut to `…`, as the pid's width lets them)
        assert top.rstrip().endswith(f"· connection lost: job (pid {pid}) gone") and "…" not in top[top.index(" step "):], top
        said = [str(n.message) for n in app.raised]
        assert said and not [s for s in said if "ctrl+r" in s], said
        assert not [s for s in said if "connection" in s], said
        await rule_kept(app, pilot)
        await pilot.press("9")  # the reason, whole, where it can be read again
        await wait_for(pilot, lambda: "connection lost: the connection to the job closed" in log_text(app),
                       "the loss in the Log")
        assert "connection lost" in header_text(app)


def test_the_headers_lost_connection_fits_80_columns_and_says_its_reason_where_there_is_room():
    session = {"pid": 4242, "argv": ["python", "train.py", "--steps", "40"], "host": "vm"}
    status = {"state": "paused", "step": 3, "phase": "before_forward"}
    lost = "connection lost: the connection to the job closed"
    narrow = render_header(session, status, 2.0, lost, width=80).plain
    assert len(narrow) <= 80 and narrow.endswith("step 3 · before_forward · connection lost"), narrow
    wide = render_header(session, status, 2.0, lost, width=160).plain
    assert wide.endswith(f"step 3 · before_forward · {lost}") and "pid 4242" in wide, wide
    ended = render_header(session, {**status, "state": "exited (137)"}, 2.0, "job killed by SIGKILL, exit code 137",
                          width=80).plain
    assert ended.endswith("job killed by SIGKILL, exit code 137"), ended


def test_a_toast_asked_for_longer_stands_a_few_seconds():
    from stepdbg_tui.toasts import standing

    assert standing(30) == standing(None) == TOAST_SECONDS <= 5 and standing(2) == 2
    assert Notification("x", timeout=standing(10)).timeout == TOAST_SECONDS
