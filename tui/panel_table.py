"""Every panel of the app, declared once: its id, the title on its tab, the name the help
gives it, its key and its class. The tabs, the number keys, the help's line of panels and
the load when a panel is shown all come from this table."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from textual.widget import Widget
from textual.widgets import DataTable, RichLog

from .asking import Loads
from .break_panel import BreakPanel
from .memory_panel import MemoryPanel
from .panels import (
    BreakpointsPanel,
    LogPanel,
    ModelPanel,
    OptimizerPanel,
    RanksPanel,
    TensorPanel,
)
from .plots import PlotsPanel
from .threads_panel import ThreadsPanel


@dataclass(frozen=True)
class Panel:
    id: str
    title: str  # on the tab: short, so that every tab fits 80 columns
    name: str  # in the help
    key: str
    cls: type[Loads]
    many_ranks: bool = False  # shown for a distributed job only
    field: str = ""  # where its key puts the focus, where not where keys land (keys_land): the field typed in

    def widget(self) -> Widget:
        return self.cls()  # type: ignore[return-value]


PANELS = (
    Panel("break", "Break", "Break", "1", BreakPanel),
    Panel("model", "Model", "Model", "2", ModelPanel),
    Panel("tensor", "Tensor", "Tensor", "3", TensorPanel, field="#tensor-name"),  # (the twentieth walk's 1)
    Panel("optimizer", "Optim", "Optimizer", "4", OptimizerPanel),
    Panel("memory", "Mem", "Memory", "5", MemoryPanel),
    Panel("plots", "Plots", "Plots", "6", PlotsPanel),
    Panel("breakpoints", "Breaks", "Breakpoints", "7", BreakpointsPanel),
    Panel("threads", "Threads", "Threads", "8", ThreadsPanel),
    Panel("log", "Log", "Log", "9", LogPanel),
    Panel("ranks", "Ranks", "Ranks", "0", RanksPanel, many_ranks=True),
)
BY_ID = {p.id: p for p in PANELS}


def one_process_words(panel: Panel) -> str:
    """Why a distributed job's panel does not open on a job of one process."""
    return f"{panel.key} shows the {panel.name} of a distributed job; this is one process"


def shown(many_ranks: bool) -> list[Panel]:
    """The panels of this app: the Ranks panel only where there are ranks."""
    return [p for p in PANELS if many_ranks or not p.many_ranks]


def keys_land(panel: Widget) -> Widget | None:
    """Where keys go on a panel, never a field (its number key, escape from one, a break that
    came; 7 then 1 typed the 1 into the Breaks add box, 3 then 2 a 2 into the Tensor name:
    the eighth walk's 1; b, Tab, Enter on a row that asks for text or a click reach a field): its
    table, else the panel itself where it takes the focus (the Break panel's source and
    locals are below the fold at 80x24 and scroll; the Tensor panel holds its fields), else
    its Log. Never nothing: the focus on no widget showed nowhere (the walk's item 7)."""
    tables = list(panel.query(DataTable))
    if tables:
        return tables[0]
    if panel.can_focus:
        return panel
    return next(iter(panel.query(RichLog)), None)  # (the Log's)


def help_lines() -> str:
    """The help's line for the number keys (the Ranks key has its own, with the rank keys)."""
    keys = [p for p in PANELS if not p.many_ranks]
    return textwrap.fill(" ".join(p.name for p in keys), width=66,
                         initial_indent=f"  {keys[0].key}-{keys[-1].key}     panels: ", subsequent_indent=" " * 10)
