"""The Threads panel: every thread's stack (the person's frames and their libraries', never
stepdbg's), under a line that says which step of the job they are of, so that a stack
shown while the job runs on is not taken for the pause's. A frame's FILE:LINE is never
broken across lines: where the line is too wide its path loses its head (`…/nn/modules/
module.py:1778 in _call_impl`)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from stepdbg.client.info_text import left_out, own_thread, worker_words

from .asking import Loads, ask
from .header import last_reached

INDENT = 2


def heading(status: dict[str, Any]) -> str:
    """'the threads at step 30 · before_backward (paused)', the step as the header names it."""
    state, phase, step = status.get("state") or "?", status.get("phase"), last_reached(status)
    if phase == "between steps" and state != "paused":  # (as the header says it: `after step 59 · RUNNING`)
        return f"the threads after step {step} ({state})"
    return f"the threads at step {step}{f' · {phase}' if phase else ''} ({state})"


def one_line(text: Any) -> str:
    """A name as one line: a control character (a newline in a code's file name drew lines of
    its own, a thread that was not there) shown as `?`."""
    return "".join(c if c.isprintable() else "?" for c in str(text))


def frame_place(file: str, line: Any, function: str, width: int) -> str:
    """`FILE:LINE in FUNCTION` in `width` columns after the indent, its path's head given up a
    folder at a time (`…/torch/_tensor.py:623 in backward`), its file name and line kept: it
    was cut inside a folder's name (`…rk/main/.venv/...`, the eighteenth walk's 3)."""
    loc = f"{one_line(file)}:{line}"
    *folders, name = loc.split("/")
    function = one_line(function)
    if len(function) > (most := max(width - INDENT - len(name) - len(" in "), 8)):  # (a name of 300 ran past the width)
        function = function[:most - 1] + "…"
    rest = f" in {function}"
    room = width - INDENT - len(rest)
    for n in range(len(folders) + 1):  # (n folders given up, from the left)
        shown = "/".join(["…", *folders[n:], name]) if n else loc
        if len(shown) <= room:
            return shown + rest
    return name + rest


def render_stacks(stacks: list[dict[str, Any]], width: int = 10_000, title: str | None = None) -> Text:
    t = Text()
    if title:
        t.append(title + "\n\n", style="bold")
    for th in stacks:
        if th.get("own"):
            t.append(own_thread(th) + "\n", style="dim")
            continue
        t.append(f"{one_line(th['name'])}{' (main)' if th.get('main') else ''}\n", style="bold")
        if left := left_out(th, 10):
            t.append(" " * INDENT + left + "\n", style="dim")
        for fr in th["stack"][-10:]:  # (the person's frames and their libraries', never stepdbg's)
            t.append(" " * INDENT + frame_place(fr["file"], fr["line"], fr["function"], width) + "\n", style="dim")
            if fr.get("code"):
                t.append(f"      {one_line(fr['code'])}\n")
    return t


def render_loader(loader: dict[str, Any] | None) -> Text:
    """The DataLoader's settings and its workers (processes, not threads: no stack of theirs
    is shown), which a data-wait break's hint sends the person to look at."""
    if not loader:
        return Text("")
    n, cores = loader.get("num_workers"), loader.get("affinity_cpus") or loader.get("cpu_count")
    t = Text("the DataLoader: ", style="bold")
    if not n:
        t.append("no worker processes (num_workers=0): the main thread loads each batch itself, in its stack below")
    else:
        t.append(f"{n} worker processes (num_workers={n}) on {cores} cores, prefetch_factor "
                 f"{loader.get('prefetch_factor')}, pin_memory {loader.get('pin_memory')}, persistent_workers "
                 f"{loader.get('persistent_workers')}")
    for w in loader.get("workers") or []:
        t.append(f"\n  worker {worker_words(w)}", style="dim")
    return t + Text("\n\n")


class ThreadsPanel(Loads, VerticalScroll):
    async def load(self, source: Any, status: dict[str, Any], history: list[dict[str, Any]]) -> None:
        stacks = await ask(self, "stacks", source.stacks())
        now = await ask(self, "status", source.status()) if stacks is not None else None  # (its loader now)
        if stacks is not None:
            self.show(stacks, heading(status), (now or {}).get("loader"))

    def compose(self) -> ComposeResult:
        yield Static(id="threads-text")

    def show(self, stacks: list[dict[str, Any]], title: str | None = None, loader: dict[str, Any] | None = None) -> None:
        width = (self.size.width or 80) - 2  # (its scrollbar)
        self.query_one("#threads-text", Static).update(render_loader(loader) + render_stacks(stacks, width, title))
