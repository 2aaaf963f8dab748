"""The k and l toasts say what the Break panel does not (issue 45, the twelfth walk's 2): since
2b44460 the panel says "step 2's update will be skipped", and the toast beside it said the
same again ("this step's update will not be applied"), over the panel's first lines
(tui/toasts.py's rule: a toast never says what its place says). It says what the skip
keeps: the parameters and the optimizer's state. The l toast said 'LR set to 0.001 (pinned)'
where the panel says 'LR set to 0.001 and pinned (param group 0, was 0.01)' (since 0f147cc):
it says how long the LR holds. Real job, Pilot at 80x24 with the toasts on; failed before
its fix."""

from __future__ import annotations

import pytest
from conftest import WAIT, text_of, wait_for

from stepdbg.wire.change_text import SKIP_KEEPS

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]

SKIP = "step 2's update will be skipped"


def record(app) -> str:
    return " ".join(text_of(app, "#break-record").split())


@pytest.mark.timeout(WAIT * 2)
async def test_the_k_toast_does_not_repeat_the_break_panel(tui_at_break):
    async with tui_at_break("--break", "step==2", script_args=("--steps", "6"), size=(80, 24),
                            notifications=True) as (app, pilot):
        await wait_for(pilot, lambda: "step 2 · before_forward" in record(app), "the break")
        before = len(app.raised)
        await pilot.press("k")
        await wait_for(pilot, lambda: SKIP in record(app), "the skip in the Break panel")
        await wait_for(pilot, lambda: len(app.raised) > before, "the k toast")
        said = [str(n.message) for n in app.raised[before:]]
        assert any(SKIP_KEEPS in s for s in said), said  # what the skip keeps, which the panel does not say
        for s in said:  # (neither the panel's words nor the same in others)
            assert "update will" not in s and "will not be applied" not in s and SKIP not in s, said
        assert SKIP_KEEPS not in record(app), record(app)  # (so the two say different things)


@pytest.mark.timeout(WAIT * 2)
async def test_the_l_toast_does_not_repeat_the_break_panel(tui_at_break):
    from textual.widgets import Input

    async with tui_at_break("--break", "step==2", script_args=("--steps", "6"), size=(80, 24),
                            notifications=True) as (app, pilot):
        await wait_for(pilot, lambda: "step 2 · before_forward" in record(app), "the break")
        before = len(app.raised)
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.focused, Input), "the LR dialog's field")
        await pilot.press(*"0.001", "enter")
        await wait_for(pilot, lambda: "LR set to 0.001 and pinned" in record(app), "the LR set in the Break panel")
        await wait_for(pilot, lambda: len(app.raised) > before, "the l toast")
        said = [str(n.message) for n in app.raised[before:]]
        assert not any("LR set" in s for s in said), said
        assert any("pinned: re-applied before each step" in s for s in said), said
