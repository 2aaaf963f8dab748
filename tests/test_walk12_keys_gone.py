"""Issue 45's twelfth walk, 2: `kill -9` of a job the TUI is attached to (`stepdbg serve` +
`stepdbg attach`, 80x24). The footer still offered `c n s r` and the toast `ctrl+r reconnects`,
each answering that the job was gone. With the job gone, as after its end, the footer offers
what still works (q, the panels of its last state, help); a key that drove the job says it is
gone; ctrl+r says `nothing to reconnect to`, as after an end (pressed on a panel, in its toast:
the eighteenth walk's leftovers 3; its words read across the toast's rows). Each failed before its fix."""

from __future__ import annotations

import os
import shutil
import signal
import time

import pytest
from conftest import WAIT, Tmux, wait_for
from test_tui_fixes import real
from test_walk19_refusal_seen import toast_words, wait_toast
from textual.widgets import Static
from tui_walk import plain, screen_text, settled

DRIVE = ("cont", "phase", "step", "replay", "LR", "skip", "breaks")


def footer(screen: str) -> str:
    return screen.rstrip("\n").splitlines()[-1]


@real
async def test_the_footer_of_a_job_killed_offers_what_still_works(tui_at_break):
    async with tui_at_break("--break", "step==2", notifications=True) as (app, pilot):
        await wait_for(pilot, lambda: "c cont" in footer(screen_text(app)), "the footer with c")
        pid = app.source.session["pid"]
        os.kill(pid, signal.SIGKILL)
        await wait_for(pilot, lambda: "c cont" not in footer(screen_text(app)), "the footer without c")
        await settled(pilot, app)
        shown = screen_text(app)
        assert "q quit" in footer(shown) and not any(w in footer(shown).split() for w in DRIVE), shown
        said = [str(n.message) for n in app.raised]
        assert not any("ctrl+r" in m for m in said) and any(f"the job (pid {pid}" in m and "is gone" in m
                                                             for m in said), said
        assert f"job (pid {pid}) gone" in app.connection, app.connection
        for key, what in (("c", "nothing to continue"), ("n", "nothing to step")):
            await pilot.press(key)
            await settled(pilot, app)  # (pressed on a panel: its toast, the eighteenth walk's leftovers 3)
            said = [str(n.message) for n in app._notifications if "nothing to" in str(n.message)]
            assert len(said) == 1 and "is gone" in said[0] and what in said[0] and "ctrl+r" not in said[0], said
        await pilot.press("e", *"p 1", "enter")
        await settled(pilot, app)
        under = plain(app.query_one("#repl-out", Static))
        assert "is gone" in under and "nothing runs in it now" in under, under


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_a_job_killed_under_attach_leaves_the_footer_and_ctrl_r_says_nothing_to_reconnect_to(
        tmp_path, private_runtime_dir, start_job):
    job = start_job("--break", "step==2", script_args=("--steps", "5"))
    pid = job.info().pid
    term = Tmux(tmp_path, private_runtime_dir, "attach", size=(80, 24))
    try:
        assert "c cont" in footer(term.wait_screen("PAUSED"))
        os.kill(pid, signal.SIGKILL)
        job.proc.wait()
        deadline = time.monotonic() + WAIT
        while "c cont" in footer(term.screen()):
            assert time.monotonic() < deadline, term.screen()
            time.sleep(0.2)
        shown = term.wait_screen(f"(pid {pid}) gone")  # (the header says it: the rest follows the same event)
        assert "q quit" in footer(shown) and not any(w in footer(shown).split() for w in DRIVE), shown
        assert "ctrl+r" not in shown, shown
        term.keys("C-r")
        # As after an end: nothing to reconnect to (one toast: the loss's goes; it was cut at `nothing to` under two)
        said = toast_words(wait_toast(term, "nothing to reconnect to"))  # (its toast: the eighteenth walk's leftovers 3)
        # (not tried: no `reconnecting…`, no `reconnect failed`; the closing walk's 11)
        assert f"the job (pid {pid}) is gone" in said and "reconnect" not in said.split("nothing to")[0], said
        term.keys("c")
        assert "ctrl+r" not in toast_words(wait_toast(term, "nothing to continue"))
    finally:
        term.close()


@real
@pytest.mark.parametrize("can_reconnect", [True, False], ids=["attach", "no reconnect"])
async def test_a_toast_that_offered_ctrl_r_says_the_job_is_gone_once_it_is(tui_at_break, can_reconnect):
    """CI's run of the test above: the socket closed while the killed process was still exiting
    (not yet a zombie), so the loss's toast offered `ctrl+r reconnects`; a second later the
    header said the job was gone, and the toast still offered ctrl+r. With nothing to reconnect
    to (the first test's app, CI's red of 2026-11-27) the toast said `q quits` alone, and the
    job's end was said nowhere but the header. The loss is told to the app as its reader tells
    it, while the job still runs; then the job is killed."""
    async with tui_at_break("--break", "step==2", notifications=True) as (app, pilot):
        pid = app.source.session["pid"]
        app.reconnect = (app.reconnect or (lambda: None)) if can_reconnect else None  # (as `stepdbg attach` gives it)
        app.connection_lost("closed")  # (the process still there: ctrl+r may find it)
        await settled(pilot, app)
        first = "ctrl+r reconnects; q quits" if can_reconnect else "q quits"
        assert [str(n.message) for n in app._notifications] == [first], app.raised
        os.kill(pid, signal.SIGKILL)
        await wait_for(pilot, lambda: app.gone is not None, "the job seen gone")
        await settled(pilot, app)
        toasts = [str(n.message) for n in app._notifications]
        assert toasts == [f"{app.gone}; q quits"] and f"(pid {pid}) is gone" in app.gone, toasts
        assert "ctrl+r" not in screen_text(app), screen_text(app)
