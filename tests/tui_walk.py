"""A seeded random walk of keys over the real TUI attached to a real job, with the
invariants a person relies on checked after every key (issue 45):

(a) a key typed while a text field has the focus never reaches the job: the job's step,
    phase and state (read by a second, separate client) do not change unless a stepping
    key was pressed while no field had the focus;
(b) nothing on screen is a Python exception's text (outside the REPL line's answer, which
    shows the user's own Python);
(c) the header's step equals the job's own step once the TUI has caught up, and never
    goes backwards;
(d) the focus is on a widget that is on screen;
(e) no word is cut at the right edge: every word a text widget holds is in what it draws
    (unless it draws an ellipsis that says so), nothing it draws lies past the edge of
    what shows it, no table is wider than its view, and the header names the script whole.

Used by test_tui_walk (a short walk in the quick tier, a long one marked slow) and by the
regression tests of the seeds it found.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from textual.content import Content
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static
from textual.worker import Worker, WorkerState

from stepdbg.client.async_client import AsyncClient
from stepdbg_tui.app import StepdbgApp

WAIT = 240  # a guard against a hang, never a measure (the suite runs beside other work)

STEPPING = {"c", "n", "s", "p", "R"}  # the keys that may move the job (outside a field)
KEYS = ["c", "n", "s", "p", "r", "l", "k", "R", "u", "d", "b", "e", "question_mark", "t", "o",
        *"1234567890", "tab", "shift+tab", "enter", "enter", "escape", "escape", "space", "delete",
        "up", "down", "pageup", "pagedown", "backspace", "home"]
# Words typed into whatever has the focus: names of the paused frame, specs, LRs, stray text
# (no q: outside a field it quits, which ends the walk).
WORDS = ["loss", "x", "model", "nan", "data_wait>2", "grad_norm>1e9", "0.001", "step", "lr 0.01",
         "model[0].weight", "cnx", "xyz"]
# A Python exception's words: said by the user's own Python on the REPL line, never elsewhere.
EXCEPTION_WORDS = re.compile(r"SyntaxError|LookupError|ZeroDivisionError|Traceback|NoneType|"
                             r"\b[A-Z][A-Za-z]*(Error|Exception):")


def screen_text(app: StepdbgApp, skip: tuple[str, ...] = ("#repl-out",)) -> str:
    """The words on the terminal, as the person sees them (the modal on top and the screen
    under it), with the rows of the widgets in `skip` blanked."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, legacy_windows=False,
                      force_terminal=True, color_system=None)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    lines = console.export_text(styles=False).splitlines()
    base = app.screen_stack[0]
    for selector in skip:
        for w in base.query(selector):
            r = w.region
            for y in range(r.y, min(r.y + r.height, len(lines))):
                if not under_dialog(app, y):  # (a dialog's row over the REPL line's answer stays)
                    lines[y] = ""
    return "\n".join(lines)


def under_dialog(app: StepdbgApp, y: int) -> bool:
    """Row `y`'s middle is a dialog's, drawn over the screen under it."""
    if len(app.screen_stack) < 2:
        return False
    try:
        widget, _ = app.screen.get_widget_at(app.size.width // 2, y)
    except Exception:  # (no widget there)
        return False
    return widget is not app.screen


def header_text(app: StepdbgApp) -> str:
    content = app.screen_stack[0].query_one("#header", Static).content
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(content)
    return console.export_text()


def header_step(app: StepdbgApp) -> int | None:
    m = re.search(r"step (\d+) · ", header_text(app))
    return int(m.group(1)) if m else None


def focus_is_visible(app: StepdbgApp) -> bool:
    """The focused widget (if any) is on screen: displayed, and with some of it in view."""
    w: Widget | None = app.focused
    if w is None:
        return True
    node: Any = w
    while node is not None:
        if getattr(node, "display", True) is False or getattr(node, "visible", True) is False:
            return False
        node = node.parent
    try:
        geometry = app.screen.find_widget(w)
    except Exception:  # not in the screen's map: not drawn
        return False
    return geometry.visible_region.area > 0


def plain(w: Static) -> str:
    """A text widget's words, unwrapped (300 columns), its markup read as it reads it."""
    content = w.visual if isinstance(w.content, str) else w.content
    if isinstance(content, Content):
        return content.plain
    console = Console(width=300, record=True, file=io.StringIO(), color_system=None)
    console.print(content)
    return console.export_text(styles=False)


def cut_words(app: StepdbgApp, text: str | None = None) -> list[str]:
    """(e): what is cut at the right edge on the screen shown, as 'where: what' lines (`text`:
    its screen_text, if read already)."""
    cuts = []
    for w in app.screen.query("*"):
        if not w.display or not w.region.area or not drawn(app, w):
            continue
        name = f"#{w.id}" if w.id else type(w).__name__
        if isinstance(w, DataTable) and w.virtual_size.width > w.scrollable_content_region.width:
            cuts.append(f"{name}: {w.virtual_size.width} columns wide in {w.scrollable_content_region.width}")
        if not isinstance(w, Static):
            continue
        rows = [strip.text for strip in w.render_lines(Region(0, 0, w.region.width, w.region.height))]
        ink = "".join("".join(r.split()) for r in rows)
        words = plain(w)
        missing = [word for word in words.split() if word not in ink]
        if missing and ink.count("…") <= words.count("…"):  # (an ellipsis it added says it cut them)
            cuts.append(f"{name}: {' '.join(missing[:6])} not drawn (drawn: {rows[:3]})")
        seen = app.screen.find_widget(w).visible_region
        edge = seen.right - w.region.x  # the first column of w past what shows it
        past = [r[edge:] for r in rows[seen.y - w.region.y:seen.bottom - w.region.y] if r[edge:].strip()]
        if past:
            cuts.append(f"{name}: {past[:2]} lies past the right edge")
    argv = app.source.session.get("argv") or []
    script = argv[1].rsplit("/", 1)[-1] if len(argv) > 1 else ""
    if script and len(app.screen_stack) == 1 and script not in (text or screen_text(app)).split("\n", 1)[0]:
        cuts.append(f"the header misses the script {script!r}")
    return cuts


def drawn(app: StepdbgApp, w: Widget) -> bool:
    """`w` is drawn on the screen shown (some of it in view)."""
    try:
        return app.screen.find_widget(w).visible_region.area > 0
    except Exception:  # not in the screen's map
        return False


async def settled(pilot: Pilot, app: StepdbgApp) -> None:
    """The key's work is done: every worker but the event pump has finished, and what they
    left is handled and drawn. Workers are awaited, not polled (a poll's pause makes every
    widget of the screen handle a message: ~10 ms of CPU, and the more polls the busier the
    machine); a pause follows the key and each round of workers (timers and callbacks after
    a refresh run in its sleep)."""
    deadline = time.monotonic() + WAIT
    await pilot.pause()
    while busy := [w for w in app.workers if not w.is_finished and w.group != "events"]:
        assert time.monotonic() < deadline, f"a worker never finished: {list(app.workers)}"
        await asyncio.wait([asyncio.ensure_future(finished(w)) for w in busy], timeout=deadline - time.monotonic())
        await pilot.pause()


async def finished(worker: Worker) -> None:
    """`worker` has ended, however: a worker's failure is the app's to say (on screen)."""
    if worker.state == WorkerState.PENDING:  # it starts on the loop's next turn
        await asyncio.sleep(0)
        return
    with contextlib.suppress(Exception):
        await worker.wait()


JobState = tuple[str, int | None, str | None, float | None]  # state, step, phase, and when its pause began


async def job_state(probe: AsyncClient) -> JobState:
    """The job's own state, step and phase, as a separate client reads them."""
    if probe.exited is not None:
        return "ended", None, "ended", None
    try:
        st = await probe.status()
    except ConnectionError:
        return "ended", None, "ended", None
    return str(st.get("state")), st.get("step"), st.get("phase"), (st.get("paused") or {}).get("at")


@dataclass
class Walk:
    """One walk: what was pressed, for the message of a failure."""

    seed: int
    size: tuple[int, int]
    pressed: list[str] = field(default_factory=list)
    highest: int = -1  # the highest step the header has shown
    job: JobState = ("?", None, None, None)  # the job's state, step, phase and pause, last read
    # The pause a stepping key was pressed at: the job leaves it when its training thread
    # wakes, after the request's answer (up to 0.1 s, more on a busy machine), so the job may
    # still be seen there after the key and leave it during a later one.
    stepped_at: float | None = None

    def where(self) -> str:
        return f"seed {self.seed} at {self.size}, after {len(self.pressed)} keys; the last: {self.pressed[-12:]}"


def choices(rng: random.Random, n: int) -> list[str | tuple[str, str]]:
    """`n` moves: a key, or ("type", word) for a word typed a key at a time."""
    out: list[str | tuple[str, str]] = []
    for _ in range(n):
        out.append(("type", rng.choice(WORDS)) if rng.random() < 0.12 else rng.choice(KEYS))
    return out


async def press(pilot: Pilot, app: StepdbgApp, probe: AsyncClient, walk: Walk, key: str) -> None:
    before = walk.job  # as the last check left it: paused, it stays so until a key moves it
    in_field = isinstance(app.focused, Input) or len(app.screen_stack) > 1
    stepping = key in STEPPING and not in_field
    submits_python = key == "enter" and isinstance(app.focused, Input) and app.focused.id in (
        "repl", "tensor-name", "tensor-index")
    walk.pressed.append(key)
    await pilot.press(key)
    await settled(pilot, app)
    after = walk.job = await job_state(probe)
    if before[0] == "paused" and stepping:
        walk.stepped_at = before[3]
    elif before[0] == "paused" and after != before and walk.stepped_at is not None and walk.stepped_at == before[3]:
        walk.stepped_at = None  # the stepping key pressed at this pause, now taking effect
    elif before[0] == "paused":
        assert after == before, f"the job moved without a stepping key: {before} → {after}; {walk.where()}"
    if submits_python:  # its answer is the user's own Python: read, and put away
        app.clear_notifications()
        await pilot.pause()
    await check_screen(pilot, app, probe, walk)


async def header_says(pilot: Pilot, app: StepdbgApp, words: str, where: str) -> None:
    """Wait until the header says `words`: its text is read, not drawn, meanwhile (the app's
    events run); once it says them, what they started is let finish, as after a key (also
    when it said them at once: the job's event may have come during the probe's read, its
    widgets updated and not yet laid out: CI's seed 13 saw the pause's words under the REPL
    line in a one-row region, a layout not yet done, as a cut)."""
    deadline = time.monotonic() + WAIT
    while words not in header_text(app):
        assert time.monotonic() < deadline, f"the header says {header_text(app)!r}, {where}"
        await asyncio.sleep(0.05)
    await settled(pilot, app)


async def check_screen(pilot: Pilot, app: StepdbgApp, probe: AsyncClient, walk: Walk) -> None:
    state, step, phase, _ = walk.job = await job_state(probe)
    if state == "paused":  # (c) the header catches up with the job
        await header_says(pilot, app, f"step {step} · {phase}", f"the job step {step} {phase}; {walk.where()}")
    elif state == "ended":
        await header_says(pilot, app, "ended", f"after the end; {walk.where()}")
    shown = header_step(app)
    if shown is not None:
        assert shown >= walk.highest, f"the header's step went back from {walk.highest} to {shown}; {walk.where()}"
        walk.highest = shown
    assert focus_is_visible(app), f"the focus is on {app.focused!r}, not on screen; {walk.where()}"  # (d)
    text = screen_text(app)
    m = EXCEPTION_WORDS.search(text)
    assert m is None, f"{m.group(0)!r} on screen; {walk.where()}:\n{text}"  # (b)
    cuts = cut_words(app, text)
    assert not cuts, f"cut at the right edge: {cuts}; {walk.where()}:\n{text}"  # (e)


async def walk_keys(seed: int, n: int, size: tuple[int, int]) -> Walk:
    """Attach the TUI and a probe to the served job, and walk `n` seeded moves."""
    probe = await AsyncClient.connect(probe=True)
    client = await AsyncClient.connect()
    app = StepdbgApp(client)
    walk = Walk(seed, size)
    try:
        async with app.run_test(size=size) as pilot:
            await settled(pilot, app)
            await check_screen(pilot, app, probe, walk)
            for move in choices(random.Random(seed), n):
                if isinstance(move, tuple):
                    for ch in move[1]:
                        await press(pilot, app, probe, walk, ch)
                else:
                    await press(pilot, app, probe, walk, move)
            app.exit(None)
    finally:
        await client.close(then="continue")
        await probe.close()
    return walk
