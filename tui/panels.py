"""The panels: each renders plain protocol data; none of them touches the connection.

Rendering is split into small pure functions (``render_*``) so the words on screen are
testable without a terminal.
"""

from __future__ import annotations

import math
from collections import deque
from contextlib import suppress
from typing import Any

from rich.padding import Padding
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.widgets import DataTable, Label, RichLog, Static

from stepdbg.client.info_text import group_other, num, optimizer_state_lines
from stepdbg.client.job import stall_of
from stepdbg.wire.rank_words import targets_words

from .asking import Loads, ask
from .breakpoints_panel import (
    BreakpointsPanel as BreakpointsPanel,  # (its own file: importers find it here)
)
from .breakpoints_panel import check_spec as check_spec
from .fitted import fill_fitted, left_out
from .no_job import no_job
from .table_in_scroll import RowTable
from .tensor_panel import FIRST
from .tensor_panel import (
    TensorPanel as TensorPanel,  # (its own file: app.py and panel_table.py import it here)
)
from .tensor_panel import render_summary as render_summary


def bad(v: Any) -> bool:
    return isinstance(v, str) and v in ("nan", "inf", "-inf") or (isinstance(v, float) and not math.isfinite(v))


# ---------------------------------------------------------------------- model


def module_expression(name: str) -> str:
    """What the Tensor field shows for a module of the Model panel: its name as a person types
    it (`model.head.0`, `model` for the root), which the job opens as the module's first
    parameter, then or again at Enter (it showed `next((model[1]).parameters(), None)`)."""
    return "model" if name == "(root)" else f"model.{name}"


# What the Model panel's |w| and |g| are, said once: its hint and the Tensor panel's words for
# a module's first parameter both use it (a module's |w| 5.21 beside its weight's norm 5.08
# in the Tensor panel read as two answers to one question: the first counts the bias too).
MODULE_NORMS = "|w| |g|: L2 norm of a module's own parameters (their gradients) together, bias included"


def first_parameter_words(name: str, row: dict[str, Any]) -> str:
    """The Tensor panel's label for a module opened from the Model panel: which tensor it
    shows, and why its norm is not the module's |w| where the module has more than it."""
    words = f"{name} ({row['type']}): {FIRST}"  # (the Tensor panel adds which, by name)
    if isinstance(row.get("weight_norm"), (int, float)):
        words += f" (the Model panel's |w| {num(row['weight_norm'], 3)} is of all its own parameters together)"
    return words


def grad_ratio(row: dict[str, Any]) -> float | None:
    g, w = row.get("grad_norm"), row.get("weight_norm")
    if isinstance(g, (int, float)) and isinstance(w, (int, float)) and w and math.isfinite(g):
        return g / w
    return None


class ModelPanel(Loads, Vertical):
    rows: dict[str, dict[str, Any]] = {}  # the modules shown, by name (Enter opens one's first parameter)
    COLUMNS = ("module", "type", "out", "params", "|w|", "|g|", "|g|/|w|", "mode")
    DROP = (7, 2, 3)  # left out first at a narrow width: mode, then out, then params (the norms stay)
    HINT = f"Enter: its first parameter in Tensor (3). {MODULE_NORMS}. red: non-finite · yellow: |g|/|w| < 1e-6"

    note = ""  # why the table is empty, or of which step, while the job runs

    async def load(self, source: Any, status: dict[str, Any], history: list[dict[str, Any]]) -> None:
        if status.get("state") == "paused":
            rows = await ask(self, "module tree", source.module_tree())
            if rows is not None:
                self.note = ""
                self.show(rows)
        elif status.get("state") == "running":  # (an empty table, its header alone, said nothing)
            self.note = (f"as of step {self.seen_step}, the last pause this panel saw; " if self.rows else "") + \
                "the modules are read at a pause (p pauses the job)"
            self.show(list(self.rows.values()))

    def compose(self) -> ComposeResult:
        yield RowTable(id="model-table", cursor_type="row", zebra_stripes=True)
        yield Label(self.HINT, classes="hint")

    def on_mount(self) -> None:  # the columns before the first answer: an empty table of no height took the focus
        self.show([])
        self.says_its_end()

    def on_resize(self) -> None:
        if self.rows:
            self.show(list(self.rows.values()))

    def show(self, rows: list[dict[str, Any]]) -> None:
        self.rows = {r["name"]: r for r in rows}
        cells = []
        for r in rows:
            ratio = grad_ratio(r)
            style = "red" if bad(r.get("grad_norm")) or bad(r.get("weight_norm")) else (
                "yellow" if ratio is not None and ratio < 1e-6 else "")
            name = "  " * max(0, r["depth"] - 1) + r["name"]
            line = [name, r["type"], str(r.get("output_shape") or "-"), str(r["params"]), num(r.get("weight_norm"), 3),
                    num(r.get("grad_norm"), 3), num(ratio, 2), "train" if r["training"] else "eval"]
            cells.append([Text(c, style=style) for c in line])
        t = self.query_one(DataTable)
        gone = fill_fitted(t, self, self.COLUMNS, cells, [r["name"] for r in rows], flexible=0, drop=self.DROP,
                           narrowest=max((len(c[0].plain) for c in cells), default=0))  # a name wraps last
        self.query_one(Label).update("\n".join(w for w in (self.note, self.HINT + left_out(gone)) if w))



# ---------------------------------------------------------------------- optimizer, memory


class OptimizerPanel(Loads, Vertical):
    """A row per param group; its other hyperparameters below the table, where they wrap (a
    cell cut at the terminal's edge showed weight_decay=0.01 as weight_decay=0.0)."""

    async def load(self, source: Any, status: dict[str, Any], history: list[dict[str, Any]]) -> None:
        info = await ask(self, "optimizer", source.optimizer_info())
        if info is not None:
            self.show(info)

    HINT = "l: set the LR of the selected group (once or pinned)"
    # After the end (or once the job is gone) `l` sets nothing: the hint said it on (the eighteenth walk's leftovers, 2)
    NO_JOB_HINT = "{}: its LR takes no change now (q quits)"

    def compose(self) -> ComposeResult:
        yield RowTable(id="opt-table", cursor_type="row")
        yield Label(self.HINT, id="opt-hint", classes="hint")
        yield Static(id="opt-state")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("group", "lr", "pinned", "params")
        self.says_its_end()
        self.watch(self.app, "status", self.lr_set)  # type: ignore[attr-defined]
        self.watch(self.app, "status", self.say_hint)  # type: ignore[attr-defined]
        self.watch(self.app, "connection", self.say_hint)  # type: ignore[attr-defined]

    def say_hint(self, _: Any = None) -> None:
        """The `l` hint while the job is there; after, that nothing changes it, and an empty table
        (the job ended before this panel read its optimizer) is not drawn: its note says why."""
        why = no_job(self.app)  # type: ignore[attr-defined]
        self.query_one("#opt-hint", Label).update(self.NO_JOB_HINT.format(why) if why else self.HINT)
        table = self.query_one(DataTable)
        table.display = bool(table.row_count) or why is None

    lr_seen: Any = None  # the LR change of the pause, as last seen in the job's status

    def lr_set(self, status: dict[str, Any]) -> None:
        """An LR set at the pause, here or by another client (its change event puts it in the
        status, job_events): the table shown asks again (it kept the LR of when it was opened
        beside another client's `lr 0.002`, the twelfth walk's 3)."""
        now = (status.get("paused") or {}).get("lr_now")
        if now is not self.lr_seen:
            self.lr_seen = now
            if now and self.app.active_panel() == "optimizer":  # type: ignore[attr-defined]
                self.app.load_panel("optimizer")  # type: ignore[attr-defined]

    def show(self, infos: list[dict[str, Any]]) -> None:
        t = self.query_one(DataTable)
        t.clear()
        t.display = True
        lines = []
        for info in infos:
            for g in info["groups"]:
                t.add_row(f"{info['type']}[{g['index']}]", num(g.get("lr")), num(g.get("pinned_lr")),
                          str(g["params"]), key=str(g["index"]))
                lines.append(f"{info['type']}[{g['index']}]: {group_other(g)}")
            lines += optimizer_state_lines(info)
        self.query_one("#opt-state", Static).update(Text("\n".join(lines)))  # (brackets are not markup)


# ---------------------------------------------------------------------- log, ranks


class LogPanel(Loads, Vertical):
    # Its lines at its bottom, over the REPL line, as a terminal's: toasts stand at the top
    # right, and a Log of a few lines had its newest under them (the seventh walk's 7).
    DEFAULT_CSS = "LogPanel { align-vertical: bottom; } LogPanel RichLog { width: 100%; height: auto; max-height: 100%; }"

    def compose(self) -> ComposeResult:
        yield WholeWidthLog(id="log", max_lines=5000, wrap=True, markup=False)

    def write(self, line: str, style: str = "") -> None:
        self.query_one(WholeWidthLog).keep(Text(line, style=style))


class WholeWidthLog(RichLog):
    """The Log's lines wrapped at its width, whatever it was when each was written: a RichLog
    keeps a line as drawn, and the lines written before the Log was first shown were drawn
    78 wide (at 160x48 they wrapped at about 80 columns: the eighth walk's 5). The lines are
    kept as written, drawn at its width (not at the app's console's: 80 under Pilot), and
    drawn again when its width changes."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.kept: deque[Text] = deque(maxlen=kw.get("max_lines"))
        self.drawn_at = 0  # the width its lines were last drawn at (0: not yet)

    def keep(self, text: Text) -> None:
        self.kept.append(text)
        self.write(hanging(text), width=self.drawn_at or None)  # (the app's console measured it 80 wide at most)

    def on_resize(self) -> None:  # (after RichLog's own, which writes what waited for a width)
        self.call_after_refresh(self._wrap_again)

    def _wrap_again(self) -> None:
        width = self.scrollable_content_region.width
        if width and width != self.drawn_at:
            self.drawn_at = width
            self.clear()
            for text in self.kept:
                self.write(hanging(text), width=width)


def hanging(text: Text) -> Text | Padding:
    """A line whose words start after spaces keeps them on each line it wraps onto (a wrapped
    `  at train.py:55  loss = nn.functional.mse_loss(model(x),` went on with `y)` at the Log's
    first column: the seventeenth walk's 8)."""
    lead = len(text.plain) - len(text.plain.lstrip(" "))
    return Padding(text[lead:], (0, 0, 0, lead), expand=False) if 0 < lead < len(text.plain) else text


STATE_STYLE = {"dead": "red", "exited": "red", "in collective": "yellow"}


class RanksPanel(Loads, Vertical):
    """Every rank side by side: state, step, phase, last loss and grad norm, and why."""

    DEFAULT_CSS = "RanksPanel #ranks-table { height: 1fr; }  /* the hint under it stays in sight */"

    async def load(self, source: Any, status: dict[str, Any], history: list[dict[str, Any]]) -> None:
        rows = await ask(self, "ranks", source.rank_table())
        if rows is not None:
            self.show(rows, source.current)

    COLUMNS = ("rank", "state", "step", "phase", "loss", "grad norm", "note")
    DROP = (5, 4, 3)  # left out first at a narrow width: grad norm, then loss, then phase (the note wraps)
    HINT = "t: view the next rank · Enter: view the selected rank · a rank that differs is the one to look at"
    shown: tuple[list[dict[str, Any]], int] | None = None  # the rows and the rank in view, last shown

    def compose(self) -> ComposeResult:
        yield Label("", id="ranks-stall", classes="hint")
        yield Label("", id="ranks-targets", classes="hint")  # who gets commands (`o`): said_targets
        yield RowTable(id="ranks-table", cursor_type="row")
        yield Label(self.HINT, id="ranks-hint", classes="hint")

    def on_mount(self) -> None:
        self.says_its_end()

    def on_resize(self) -> None:
        if self.shown:
            self.show(*self.shown)

    def say_ended(self) -> None:
        """After the end each rank's row is its own record of its end (exited, its last step),
        the rank in view marked: the panel kept its last answer's rows, a pause's, with a note
        that said so (issue 45, the thirteenth walk's 2)."""
        source = getattr(self.app, "source", None)
        if not callable(getattr(source, "ended_rows", None)):
            return super().say_ended()
        for note in self.query("#ended-note"):
            note.remove()
        self.show(source.ended_rows(), source.current)

    def said_targets(self, ended: bool) -> None:
        """Above the rows: which ranks get stepping and changes (`o` chose rank 1, `n` moved it
        alone, and the panel said nothing of it: the twentieth walk's 1); not after the end."""
        targets = getattr(getattr(self.app, "source", None), "targets", None)
        with suppress(NoMatches):
            said = self.query_one("#ranks-targets", Label)
            said.update(Text(f"{targets_words(targets)} (o chooses)", style="" if targets is None else "bold yellow"))
            said.display = not ended

    def show(self, rows: list[dict[str, Any]], current: int) -> None:
        self.shown = (rows, current)
        stall = stall_of(rows)
        try:
            said = self.query_one("#ranks-stall", Label)
        except NoMatches:  # the window closed while the answer was on its way (a worker's late show)
            return
        said.update(Text(f"stalled: {stall['diagnosis']}", style="bold red") if stall else "")
        said.display = bool(stall)
        self.said_targets(ended=all(r["state"] in ("exited", "dead") for r in rows))
        cells = []
        for r in rows:
            style = "bold" if r["rank"] == current else STATE_STYLE.get(r["state"], "")
            line = [f"{'▶ ' if r['rank'] == current else '  '}{r['rank']}", r["state"], num(r["step"]),
                    num(r["phase"]), num(r["loss"]), num(r["grad_norm"]), r["note"]]
            cells.append([Text(str(c), style=style) for c in line])
        gone = fill_fitted(self.query_one(DataTable), self, self.COLUMNS, cells, [str(r["rank"]) for r in rows],
                           flexible=6, drop=self.DROP, narrowest=30)
        self.query_one("#ranks-hint", Label).update(self.HINT + left_out(gone))
