"""The Plots after 3,000 steps of a NaN from step 30 on (issue 45, a newcomer's walk of
08:30): `stepdbg python demos/nan_log.py --steps 3000`, `c` to the end, 6 at 160x48 froze
the TUI 21-29 s (leaving took as long). The break's values at step 30 (data wait, LR) were
taken for a step not finished, as the app's history (its last 500: steps 2500–2999) did not
hold step 30, and drawn after step 2999: the x range became one step wide and plotext drew
each point's line to the next across the whole plot, 888,000 cells a plot. And the plots
were of those 500 steps only: `loss: not finite at steps 2500–2999 (not drawn)` over an
empty box, the 30 finite steps before the NaN gone.

Here the job is the fake's, paused at its NaN break at step 30; `c`, steps 30–2999 come as
the job sends them (500 an event at most), then its end. The work plotext is handed is
counted (its points, and the cells of the lines it joins them with), never timed."""

from __future__ import annotations

from typing import Any

import plotext._utility as plotext_utility
import pytest
from conftest import wait_for
from fake_source import HISTORY
from test_tui_keys import started
from tui_walk import screen_text

from stepdbg_tui.plots import DRAWN_MOST

pytestmark = pytest.mark.timeout(180)  # (before the fix a picture at 160x48 took minutes: a hang's guard)

STEPS = 3000
LATER = [{**HISTORY[-1], "step": s, "loss": "nan", "grad_norm": "nan"} for s in range(30, STEPS)]
CELLS_MOST = 20_000  # a plot's line cells: its width in dots, plus its height in dots a point at most


def counting(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(points handed, cells joined) of each line plotext draws."""
    seen: list[tuple[int, int]] = []
    get_lines = plotext_utility.get_lines

    def counted(x: list[Any], y: list[Any], *other: Any) -> Any:
        out = get_lines(x, y, *other)
        seen.append((len(x), len(out[0])))
        return out

    monkeypatch.setattr(plotext_utility, "get_lines", counted)
    return seen


def work_is_bounded(seen: list[tuple[int, int]]) -> None:
    """Each line plotext drew had at most 2 * DRAWN_MOST points (an LR's staircase doubles its
    points) and CELLS_MOST cells (before: 501 points, 1,036,933 cells)."""
    assert max((points for points, _ in seen), default=0) <= 2 * DRAWN_MOST, seen
    assert max((cells for _, cells in seen), default=0) <= CELLS_MOST, max(seen, key=lambda s: s[1])


def braille_rows(app: Any, selector: str) -> int:
    """The rows of a plot's box with a drawn dot in them, as the screen shows it."""
    r = app.query_one(selector).region
    lines = screen_text(app).splitlines()[r.y:r.y + r.height]
    return sum(any("\u2801" <= c <= "\u28ff" for c in line[r.x:r.x + r.width]) for line in lines)


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
async def test_the_plots_of_a_long_run_after_a_nan_are_whole_and_bounded(monkeypatch, size):
    seen = counting(monkeypatch)
    src, app, ctx = await started(size=size)
    async with ctx as pilot:
        await wait_for(pilot, lambda: len(app.history) == 30 and app.status.get("state") == "paused", "the break")
        await pilot.press("c")
        src.push("resumed", {"step": 30})
        for first in range(0, len(LATER), 450):
            chunk = LATER[first:first + 450]
            src.push("step", {**chunk[-1], "earlier": chunk[:-1]})
            await wait_for(pilot, lambda c=chunk: app.history[-1]["step"] == c[-1]["step"], "the steps")
        src.push("exited", {"exit_code": 0, "steps": STEPS})
        await wait_for(pilot, lambda: str(app.status.get("state", "")).startswith("exited"), "the end")
        assert app.history[0]["step"] == STEPS - 500  # (the app keeps its last 500)
        await pilot.press("6")
        await wait_for(pilot, lambda: "not finite at steps" in " ".join(screen_text(app).split()), "the loss plot")
        shown = " ".join(screen_text(app).split())
        work_is_bounded(seen)  # (the plots in view drawn)
        assert "loss: steps 0–29" in shown, shown
        assert "the plots are its record to its end, step 2999" in shown, shown
        assert "not finite at steps 30–2999 (not drawn)" in shown, shown  # (the NaN's span said)
        assert braille_rows(app, "#plot-loss") >= 3, screen_text(app)  # the 30 finite steps drawn
        await pilot.press("end")  # the last plots, in view at 80x24 too
        await wait_for(pilot, lambda: "step time s: steps 0–2999" in " ".join(screen_text(app).split()), "step time")
        shown = " ".join(screen_text(app).split())
        assert "downsampled: least and most of each 15 steps" in shown, shown  # (said so)
        assert braille_rows(app, "#plot-step_time") >= 1, screen_text(app)
        await pilot.press("home", "1")
        await wait_for(pilot, lambda: app.active_panel() == "break", "the Break panel")
    assert seen, "no plot was drawn"
    work_is_bounded(seen)


async def test_attached_after_3000_steps_the_plots_ask_the_job_for_its_whole_record(monkeypatch):
    """Attached to a job paused at step 3000 (the app asks for its last 500 steps): Plots (6)
    asks the job for all it keeps, once, and draws the 30 finite steps before the NaN."""
    import fake_source

    monkeypatch.setattr(fake_source, "HISTORY", [*HISTORY, *LATER])
    src, app, ctx = await started(size=(160, 48))
    async with ctx as pilot:
        await wait_for(pilot, lambda: len(app.history) == 500, "the app's history")
        await pilot.press("6")
        await wait_for(pilot, lambda: "loss: steps 0–29" in " ".join(screen_text(app).split()), "the loss plot")
        assert "not finite at steps 30–2999 (not drawn)" in " ".join(screen_text(app).split())
        assert braille_rows(app, "#plot-loss") >= 3, screen_text(app)
        await pilot.press("1", "6")
        await wait_for(pilot, lambda: app.active_panel() == "plots", "the Plots again")
        assert [c for c in src.calls if c[0] == "history"] == [("history", (500,)), ("history", (10_000,))]
