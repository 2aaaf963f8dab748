"""The Memory panel: what holds the memory at a pause, by category with bars; the largest
tensors (Enter opens one in the Tensor panel); each device's allocator line; the cause of
an out-of-memory break; and memory at the end of each step, plotted with axes, the
paused step's value (at an out-of-memory break, what it asked for) marked in red."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.errors import NoWidget
from textual.widgets import DataTable, Label, Static

from stepdbg.client.memory_text import (
    LABELS,
    allocator_lines,
    bar,
    category_rows,
    partial_lines,
    snapshot_hint,
)
from stepdbg.wire.conditions import format_size

from .asking import Loads, ask
from .fitted import fill_fitted
from .plots import StepPlot, drawing, log_scale, points
from .table_in_scroll import TableInScroll

LARGEST = "largest tensors (Enter opens one in the Tensor panel)"


class MemoryPanel(Loads, VerticalScroll):
    DEFAULT_CSS = """
    MemoryPanel #mem-largest { height: auto; max-height: 12; }
    MemoryPanel StepPlot { height: 11; }
    MemoryPanel Label { width: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Static(id="mem-now")
        yield Static(id="mem-categories")
        yield Label(LARGEST, id="mem-largest-label", classes="hint")
        yield TableInScroll(id="mem-largest", cursor_type="row", zebra_stripes=True)
        yield Label(id="mem-plot-label", classes="hint")
        yield StepPlot(id="mem-plot")

    COLUMNS = ("size", "tensor", "category", "dtype", "shape", "device")

    def on_mount(self) -> None:  # (the job's end said above what it last showed, as the Model panel does)
        self.says_its_end()

    async def load(self, source: Any, status: dict[str, Any], history: list[dict[str, Any]]) -> None:
        mem = await ask(self, "memory", source.memory())
        if mem is not None:
            self.show(mem, history)

    def show(self, mem: dict[str, Any], history: list[dict[str, Any]]) -> None:
        lines = allocator_lines(mem)
        oom = mem.get("oom")
        if oom and oom.get("cause"):
            lines.append(f"out of memory ({format_size(oom.get('asked') or 0)} asked), "
                         f"{oom['cause']['rule']}: {oom['cause']['text']}")
        lines += [x for x in (snapshot_hint(mem), snapshot_line(mem)) if x] + partial_lines(mem)
        self.query_one("#mem-now", Static).update(Text("\n".join(lines)))  # shapes in [] are not markup
        self.query_one("#mem-categories", Static).update(category_table(mem))
        self.largest = mem.get("largest") or []
        counted = mem.get("by_category") is not None  # (while the job runs: the table's header alone said nothing)
        self.query_one("#mem-largest-label", Label).update(LARGEST if counted else "largest tensors: listed at a pause (p pauses the job)")
        self.fill_largest()
        self.show_plot(mem, history)
        self.call_after_refresh(self.cursor_shown)

    largest: list[dict[str, Any]] = []  # the rows of the last answer

    def fill_largest(self) -> None:
        """The largest tensors, fitted to the panel's width (a long name folds)."""
        rows = [[Text(v) for v in (format_size(r["bytes"]), r["name"], LABELS.get(r["category"], r["category"]),
                                   r["dtype"], str(r["shape"]), r["device"])] for r in self.largest]
        fill_fitted(self.query_one(DataTable), self, self.COLUMNS, rows, [r["name"] for r in self.largest], flexible=1)

    def on_resize(self) -> None:  # (its content's height too: the lines above the table laid out)
        self.fill_largest()  # fitted again: a table fitted at 160 columns was cut at `dtype    s` at 80
        self.focus_in_view()
        self.call_after_refresh(self.redraw_largest)

    def redraw_largest(self) -> None:
        """The table drawn again once refitted: its header kept the widths of before the resize
        (`size  tensor  category` over rows under other headings at 80x24, the eleventh walk's 3)."""
        t = self.query_one(DataTable)
        t._clear_caches()
        t.refresh()

    def cursor_shown(self) -> None:
        """The panel shown again (or its rows again): the table's cursor row in view where the
        table has the focus. Back on the panel, it was scrolled to its top with the cursor on a
        row below the view, and Enter opened a row never shown (the closing walk's 5). Its
        first row as at the first show: the focus_in_view rule (the lines above come first)."""
        t = self.query_one(TableInScroll)
        if self.screen.focused is t and t.cursor_row > 0:
            t.cursor_in_view()
        self.focus_in_view()

    def focus_in_view(self) -> None:
        """The focus where the person sees it: on the table where some of it shows, else on
        the panel, whose keys scroll it (Tab then reaches the table). At an out-of-memory
        break at 80x24 the lines above the table fill the panel's view from its top. Only
        a table laid out, whole below the view, gives the focus away (not one of no height
        yet, before the layout of a panel just shown)."""
        t = self.query_one(DataTable)
        if self.screen.focused is not t or not t.size.height:
            return
        try:
            at = self.screen.find_widget(t).virtual_region
        except NoWidget:  # not drawn: another panel is shown
            return
        if at.height and at.y >= self.scroll_offset.y + self.scrollable_content_region.height:
            self.screen.set_focus(self, scroll_visible=False)

    def show_plot(self, mem: dict[str, Any], history: list[dict[str, Any]]) -> None:
        steps, values = points(history, "mem")
        marked = mem.get("step") if mem.get("by_category") is not None else None
        now = mem.get("now")
        oom = mem.get("oom") or {}
        what = "memory now"
        if marked is not None and isinstance(now, (int, float)):
            if oom.get("asked"):
                now, what = now + oom["asked"], "in use + asked"
            steps, values = [*steps, marked], [*values, float(now)]
        log = log_scale(values)
        text = "memory at the end of each step (CUDA allocated, else host RSS)"
        if values:
            text += f": {format_size(values[0])} → {format_size(values[-1])}"
            if marked is not None:
                text += f" · step {marked}: {what} (red line)"
            if log:
                text += " · log scale"
        self.query_one("#mem-plot-label", Label).update(text)
        plot = self.query_one(StepPlot)
        plot.draw = drawing(steps, values, log, marked, size_labels)
        plot.refresh()


def size_labels(ticks: list[float]) -> list[str]:
    """Sizes in bytes for an axis, as few digits as keep them apart: 323MB, 323.2MB, ...
    (three digits each read `323MB 323MB 323MB` where memory moved by 1MB)."""
    big = max((abs(t) for t in ticks), default=0.0)
    scale, unit = next(((10.0 ** (3 * k), u) for k, u in reversed(list(enumerate(("B", "KB", "MB", "GB", "TB"))))
                        if big >= 10.0 ** (3 * k)), (1.0, "B"))
    for digits in range(3, 10):
        labels = [f"{t / scale:.{digits}g}{unit}" for t in ticks]
        if len(set(labels)) == len(set(ticks)):
            return labels
    return labels


def category_table(mem: dict[str, Any]) -> Any:
    """Memory by category with bars, or why there is none yet."""
    if mem.get("by_category") is None:
        return "memory by category is counted at a pause"
    t = Table(box=None, padding=(0, 1), title=f"tensors by category: {format_size(mem.get('counted') or 0)} "
                                               f"counted, each storage once", title_justify="left")
    for col, justify in (("category", "left"), ("size", "right"), ("", "left"), ("share", "right")):
        t.add_column(col, justify=justify)  # type: ignore[arg-type]
    for label, n, share in category_rows(mem):
        t.add_row(label, format_size(n), bar(share), f"{share:.0%}")
    return t


def snapshot_line(mem: dict[str, Any]) -> str:
    """The snapshots a rewind (R, or `rewind [STEP]` on the REPL line) can go back to."""
    snaps = mem.get("snapshots") or []
    if not mem.get("keep_every"):
        return "no snapshots kept: start with --keep-every N to be able to rewind"
    if not snaps:
        return f"snapshots every {mem['keep_every']} steps: none yet"
    kept = ", ".join(f"step {s['step']}{' (tried)' if s.get('tried') else ''}" for s in snaps)
    return (f"snapshots every {mem['keep_every']} steps ({mem.get('keep')} kept, "
            f"{format_size(snaps[-1]['bytes'])} each): {kept}; R rewinds")
