"""Words after the seventh newcomer walk (issue 45): the LR dialog says the LR as the panels
say a number, and ranks are said in words (`ranks [1]` was a Python list). The TUI under
Pilot at 80x24 and 160x48 with a canned source, and the console's own output; each failed
before its fix."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest
from fake_source import FakeJobSource, FakeSource
from test_tui_fixes import wait_for
from tui_walk import screen_text

from stepdbg.client import commands
from stepdbg_tui.app import StepdbgApp

pytestmark = pytest.mark.timeout(60)

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]


def float32(v: float) -> float:
    """`v` as a float32 LR reads back in Python (a tensor LR, or one a checkpoint stored)."""
    return struct.unpack("f", struct.pack("f", v))[0]


def words_on(app: StepdbgApp) -> str:
    return " ".join(screen_text(app, skip=()).split())


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(("lr", "said"), [(float32(3e-4), "0.0003"), (float32(1e-5), "1e-05"), (1e-9, "1e-09")])
async def test_the_lr_dialog_says_the_lr_as_the_panels_do(size, lr, said):
    """l at a pause: the dialog said `(now 0.0003000000142492354)` of a float32 LR (the
    walk saw a small LR said `0.0`); it says it with the panels' 4 digits, never 0."""
    src = FakeSource(paused=True)
    src.paused = {**(src.paused or {}), "scalars": {**(src.paused or {})["scalars"], "lr": [lr]}}
    src.status_at_attach = {**src.status_at_attach, "paused": src.paused}
    app = StepdbgApp(src, clock=lambda: 1754.0)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("l")
        await wait_for(pilot, lambda: "learning rate for" in words_on(app), "the LR dialog")
        shown = words_on(app)
        assert f"learning rate for all groups (now {said})" in shown, shown
        assert "(now 0.0)" not in shown and "0000" not in shown, shown


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(("typed", "said"), [("1", "rank 1"), ("0,1", "ranks 0 and 1"), ("0,2-3", "ranks 0, 2 and 3"),
                                             ("all", "every rank")])
async def test_o_says_the_ranks_in_words_and_the_words_stay(size, typed, said):
    """o, a set of ranks, Enter: a toast said `stepping and changes go to ranks [1]` (and
    went). The ranks are said in words, under the REPL line where they stay."""
    app = StepdbgApp(FakeJobSource(), clock=lambda: 1754.0)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("o", *typed, "enter")
        await wait_for(pilot, lambda: len(app.screen_stack) == 1, "the dialog to close")
        await pilot.pause()
        app.clear_notifications()
        await pilot.pause()
        shown = words_on(app)
        assert f"stepping and changes go to {said}" in shown and "[" not in shown.split("go to")[-1][:20], shown


@pytest.mark.parametrize(("typed", "said"), [("1", "rank 1"), ("0,1", "ranks 0 and 1"), ("", "every rank")])
def test_the_console_says_the_ranks_in_words(capsys, typed, said):
    """`on 1` at a job's console printed `stepping and changes go to ranks [1]`."""
    job = SimpleNamespace(clients=[None, None], targets=None)
    commands._job_command(job, "on", typed)
    assert capsys.readouterr().err.strip() == f"stepping and changes go to {said}"
