"""A frame with none of the user's locals says so (issue 45, the sixteenth walk's 14): `u` to
nan_log's `<module>` (imports, functions and classes, all left out of a locals view) showed no
locals section and no words, as if the view had failed. The TUI under Pilot at 80x24, a real
job of the README's demo."""

from __future__ import annotations

from conftest import ROOT, text_of, wait_for
from test_tui_fixes import real
from tui_walk import screen_text


@real
async def test_the_module_frame_of_nan_log_says_it_has_no_locals_of_yours(tui_at_break):
    async with tui_at_break("--break", "nan", script=ROOT / "demos" / "nan_log.py") as (app, pilot):
        await wait_for(pilot, lambda: "locals" in text_of(app, "#break-locals"), "the break's locals")
        await pilot.press("u")
        await wait_for(pilot, lambda: "<module>" in " ".join(screen_text(app).split()), "the module frame")
        await wait_for(pilot, lambda: "none of yours in this frame" in " ".join(text_of(app, "#break-locals").split()),
                       "the module frame's words")
