"""The Log's wrapped lines keep their indent (issue 45's seventeenth walk, 8): `  at
/work/main/demos/nan_log.py:55  loss = nn.functional.mse_loss(model(x),` went on with `y)` at
the Log's first column, as did the replay's `  reproduced from the same state: ...`. The
Log panel alone, 40 columns wide, under Pilot."""

from __future__ import annotations

from textual.app import App, ComposeResult
from tui_walk import screen_text

from stepdbg_tui.panels import LogPanel


class OneLog(App[None]):
    def compose(self) -> ComposeResult:
        yield LogPanel()


async def test_a_wrapped_line_goes_on_under_its_own_first_word():
    app = OneLog()
    async with app.run_test(size=(40, 12)) as pilot:
        panel = app.query_one(LogPanel)
        panel.write("stepdbg: break at step 30 (before_backward) [nan]: loss is nan")
        panel.write("  at /work/main/demos/nan_log.py:55  loss = nn.functional.mse_loss(model(x), y)")
        await pilot.pause()
        await pilot.pause()
        lines = [line.rstrip() for line in screen_text(app, skip=()).splitlines() if line.strip()]
        at = next(i for i, line in enumerate(lines) if line.startswith("  at "))
        assert len(lines) > at + 1 and all(line.startswith("  ") and not line.startswith("   ")
                                           for line in lines[at:]), lines
        assert lines[0].startswith("stepdbg: break") and not lines[1].startswith(" "), lines  # (no indent: none added)
