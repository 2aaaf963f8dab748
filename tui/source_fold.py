"""The Break panel's source view follows the frame chosen with u and d: the frame's line (❱)
is scrolled into view. After `r` the replay's words above the source grow the panel, and `u`
to `main()` left `❱ 66 main()` below the fold at 80x24 (issue 45's eighteenth walk, 2). The
panel's own scroll is left as it is at a new pause (its break's words are at its top), and
where neither the frame nor the replay changed. A replay drawn at the same break follows the
line too: `r` at 80x24 pushed the paused line below the fold (the nineteenth walk's 2)."""

from __future__ import annotations

from typing import Any

from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Static

from . import rank_replays

MARK = "❱"  # rich's Syntax marks the highlighted line's number with it


def _chosen(frames: list[dict[str, Any]] | None) -> tuple[Any, ...] | None:
    f = next((f for f in frames or [] if f.get("selected")), None)
    return (f.get("file"), f.get("line"), f.get("function")) if f else None


class Followed:
    """What the panel showed last: the break, the frame chosen at it and the replay shown."""

    def __init__(self) -> None:
        self.key: tuple[Any, ...] | None = None
        self.frame: tuple[Any, ...] | None = None
        self.replay: dict[str, Any] | None = None


FOLLOWED: dict[int, Followed] = {}  # (by the panel's id(): one panel an app)


def follow_frame(panel: Widget, brk: dict[str, Any] | None, frames: list[dict[str, Any]] | None) -> None:
    """After the panel is drawn: where the frame chosen at the same break changed, or a replay
    came into the panel above the source, its source line is scrolled into view (once the
    panel's new layout is made)."""
    seen = FOLLOWED.setdefault(id(panel), Followed())
    key = (brk.get("step"), brk.get("phase"), brk.get("condition")) if brk else None
    frame, replay = _chosen(frames), rank_replays.shown(panel.app)
    moved = key is not None and key == seen.key and (frame != seen.frame or (replay is not None and replay != seen.replay))
    seen.key, seen.frame, seen.replay = key, frame, replay
    if moved:
        panel.call_after_refresh(_into_view, panel)


def _into_view(panel: Widget) -> None:
    source = panel.query_one("#break-source", Static)
    width, code = source.content_region.width, source.content
    if not width or isinstance(code, str):
        return
    console = panel.app.console
    lines = console.render_lines(code, console.options.update_width(width), pad=False)
    row = next((i for i, line in enumerate(lines) if MARK in "".join(s.text for s in line)), None)
    if row is not None:
        top = source.virtual_region.y + source.styles.gutter.top
        panel.scroll_to_region(Region(0, top + row, width, 1), animate=False, immediate=True)
