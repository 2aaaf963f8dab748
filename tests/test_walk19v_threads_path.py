"""The Threads panel at 80x24 gives up a frame's folders, never part of a folder's name (issue
45's eighteenth walk, 3): torch's frame read `…rk/main/.venv/lib/python3.11/site-packages/
torch/_tensor.py:623 in backward`, cut inside `work`. Now whole folders go first, from the
left (`…/main/.venv/...`), the file name and line kept. A real job under Pilot at 80x24."""

from __future__ import annotations

import re

import pytest
from conftest import DEMOS, wait_for
from tui_walk import screen_text, settled

pytestmark = pytest.mark.timeout(300)


async def test_a_long_frame_path_loses_whole_folders_its_file_and_line_kept(tui_at_break):
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        await pilot.press("8")
        await wait_for(pilot, lambda: "_tensor.py:" in screen_text(app), "torch's frame")
        await settled(pilot, app)
        shown = screen_text(app)
        frames = [ln.strip() for ln in shown.splitlines() if re.search(r"\.py:\d+ in ", ln)]
        torch_frame = next(f for f in frames if "_tensor.py:" in f)
        assert re.search(r"torch/_tensor\.py:\d+ in backward$", torch_frame), shown
        cut = [f for f in frames if f.startswith("…")]
        assert cut and all(f.startswith("…/") for f in cut), shown  # (a folder's name never cut)
