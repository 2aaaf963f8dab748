"""The header is spelled the same whichever rank is in view (issue 45, the closing walk's
12). ddp_nan on two ranks under torchrun, a TUI attached after the break
(test_walk14_ranks_attach): rank 0 paused for rank 1's break (`PAUSED [rank 1]`), rank 1 for its
own (`PAUSED [nan]`, narrower); at 80 columns the header kept a clock on rank 0's view and
the pid on rank 1's. Widths 70 to 120, the clock held at 1m23s: the pid, the clock and the
host are said on both ranks' headers alike."""

from __future__ import annotations

import re

import pytest
from test_ranks import WAIT
from test_walk14_ranks_attach import tui_after_the_break
from tui_walk import header_text, settled

pytestmark = pytest.mark.slow  # real torchrun jobs on gloo


def spelling(header: str) -> tuple[bool, bool, bool]:
    """Which of the pid, the clock and the host the header says."""
    return "pid " in header, re.search(r"\d+s · step", header) is not None, "@" in header


@pytest.mark.timeout(WAIT * 3)
async def test_the_header_is_spelled_the_same_on_every_rank(tmp_path, private_runtime_dir):
    async with tui_after_the_break(tmp_path) as (app, pilot, first):
        pids = [len(str(c.session["pid"])) for c in first]
        if pids[0] != pids[1]:
            pytest.skip(f"the ranks' pids have {pids} digits: their widths differ on their own")
        app.clock = lambda: (app.source.session.get("started") or 0) + 83.0  # the clock at 1m23s, on any rank
        seen: dict[int, list[tuple[int, str]]] = {}
        for rank in (0, 1):
            if rank:
                await pilot.press("t")
            rows = seen[rank] = []
            for width in range(70, 121):
                await pilot.resize_terminal(width, 24)
                await settled(pilot, app)
                app.refresh_header()
                await pilot.pause()
                assert f"rank {rank}/2" in header_text(app), header_text(app)
                rows.append((width, header_text(app).strip()))
        differ = [(w, a, b) for (w, a), (_, b) in zip(seen[0], seen[1], strict=True) if spelling(a) != spelling(b)]
        assert not differ, "\n".join(f"{w}: {a!r} / {b!r}" for w, a, b in differ[:4])
