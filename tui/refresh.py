"""Filling a panel when it is shown: ask the source for what the panel needs, then show it."""

from __future__ import annotations

from typing import Any

from textual.widgets import Input

from .memory_panel import MemoryPanel
from .panels import (
    BreakpointsPanel,
    ModelPanel,
    OptimizerPanel,
    RanksPanel,
    ThreadsPanel,
)
from .plots import PlotsPanel


async def refresh_panel(app: Any, pid: str) -> None:  # noqa: C901, PLR0912 - one branch per panel, in the order of the number keys
    """Refresh panel `pid` of the app from its source (requests that fail are shown by app.ask)."""
    paused = app.status.get("state") == "paused"
    if pid == "model" and paused:
        rows = await app.ask("module tree", app.source.module_tree())
        if rows is not None:
            app.query_one(ModelPanel).show(rows)
    elif pid == "optimizer":
        info = await app.ask("optimizer", app.source.optimizer_info())
        if info is not None:
            app.query_one(OptimizerPanel).show(info)
    elif pid == "memory":
        mem = await app.ask("memory", app.source.memory())
        if mem is not None:
            app.query_one(MemoryPanel).show(mem, app.history)
    elif pid == "plots":
        brk = app.status.get("paused")
        app.query_one(PlotsPanel).show(app.history, brk["step"] if brk else None)
    elif pid == "breakpoints":
        rows = await app.ask("breakpoints", app.source.breakpoints())
        if rows is not None:
            app.query_one(BreakpointsPanel).show(rows)
    elif pid == "ranks" and app.is_job:
        rows = await app.ask("ranks", app.source.rank_table())
        if rows is not None:
            app.query_one(RanksPanel).show(rows, app.source.current)
    elif pid == "threads":
        stacks = await app.ask("stacks", app.source.stacks())
        if stacks is not None:
            app.query_one(ThreadsPanel).show(stacks)
    elif pid == "tensor" and paused and not app.query_one("#tensor-name", Input).value:
        app.query_one("#tensor-name", Input).value = "loss"
        await app.show_tensor("loss", "")
