"""The Breakpoints panel (7): the breakpoints in a table, a spec typed below is added, space
turns the selected one on or off, delete removes it; the hint says where the keys go."""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.coordinate import Coordinate
from textual.css.query import NoMatches
from textual.events import Key
from textual.widgets import DataTable, Input, Label

from stepdbg.client.info_text import quiet_words
from stepdbg.wire.conditions import ConditionError, parse

from .asking import Loads, ask
from .fields import Field
from .fitted import fill_fitted, focus_mark, left_out
from .no_job import no_job
from .table_in_scroll import RowTable


def check_spec(spec: str) -> str | None:
    """The agent's own grammar, checked as you type; None when the spec is good."""
    if not spec.strip():
        return None
    try:
        parse(spec)
    except ConditionError as e:
        return str(e)
    return None


class BreakpointsPanel(Loads, Vertical):
    """The breakpoints: a spec typed below is added, space turns the selected one on or off,
    delete removes it. The requests go to the app's source (a reconnect replaces it)."""

    # The error wraps: at 80x24 it was cut at 'known: nan, inf, no'.
    # The empty table's focus is seen on its header (its tint alone left a row that showed no
    # focus, and the Tab after the last delete seemed to land nowhere: the nineteenth walk's 1).
    DEFAULT_CSS = "BreakpointsPanel #break-error { width: 100%; color: $error; }" + focus_mark("#breaks-table") + \
        "BreakpointsPanel #breaks-table.-empty:focus > .datatable--header { background: $accent 40%; }"

    async def load(self, source: Any, status: dict[str, Any], history: list[dict[str, Any]]) -> None:
        rows = await ask(self, "breakpoints", source.breakpoints())
        if rows is not None:
            self.show(rows)

    said = ""  # what an add said under the box, until the next spec is typed there
    note = ""  # a pause that came while the box had the focus, said under it until the job goes on
    quiet = ""  # the breakpoints that stay true after their break, so are not reported again
    words: str | None = None  # what say() was last told

    def say(self, words: str | None) -> None:
        """Under the add box: `words` (the spec's error, an answer), the pause's note and which
        breakpoints are quiet. Text, not markup: a spec with [ in it (model[0]) raised
        MarkupError and ended the TUI."""
        self.words = words
        with suppress(NoMatches):  # (the window closing)
            self.query_one("#break-error", Label).update(Text("\n".join(w for w in (words, self.note, self.quiet) if w)))

    def job_paused(self, note: str) -> None:
        """A pause came while the add box had the focus (note), or the job went on (""): the
        typing stays in the box (issue 45's (a)), and what `c` typed there would have done is
        said where the person looks (the header alone said it: the sixth walk's 5)."""
        self.note = note
        self.say(check_spec(self.query_one("#break-input", Input).value))

    def compose(self) -> ComposeResult:
        yield RowTable(id="breaks-table", cursor_type="row")
        yield Label(self.HINT, id="breaks-hint", classes="hint")
        yield Field(placeholder="add: nan, grad_norm>100, loss_spike>3, expr:loss > 4 and step > 100",
                    id="break-input", empties=True)  # (each spec its own: fields.Field)
        yield Label("", id="break-error", markup=False)

    # Where the keys go, said where the person looks (the seventeenth walk's 1: the hint invited
    # typing, the table had the focus, and `nan` typed stepped the job).
    HINT = "keys act on the job here (n steps it) · b or Tab: type a spec below\nspace: on/off · delete: remove"
    BOX_HINT = "Enter adds the spec typed · escape: the table (space turns one on or off, delete removes it)"
    rows: list[dict[str, Any]] | None = None  # the last shown (filled again at a resize)
    gone: list[str] = []  # the columns the width left out

    # After the end (or once the job is gone) no key changes them (the eighteenth walk's 4: the
    # hint said `keys act on the job here`, and `nan` Enter in the box did nothing and said nothing).
    ENDED_HINT = "{}: its breakpoints as they were; they take no change now (q quits)"
    NOT_ADDED = "{}: no spec typed here is added"
    # Gone before the panel was shown (kill -9, 7 never pressed): no rows, and the hint said `its
    # breakpoints as they were` over none (the nineteenth walk's 4). The job's last status named them.
    UNREAD_HINT = "{} before this panel read its breakpoints (its last status named: {}); they take no change now (q quits)"

    def on_mount(self) -> None:
        self.watch(self.screen, "focused", self._says_where_keys_go)
        self.watch(self.app, "status", lambda _: self._says_where_keys_go(self.screen.focused))
        self.watch(self.app, "connection", lambda _: self._says_where_keys_go(self.screen.focused))  # (gone)

    def _says_where_keys_go(self, focused: Any) -> None:
        with suppress(NoMatches):
            why = no_job(self.app)
            named = ", ".join(map(str, self.app.status.get("breaks") or ())) or "none"
            hint = (self.UNREAD_HINT.format(why, named) if self.rows is None else self.ENDED_HINT.format(why)) if why else \
                self.BOX_HINT if getattr(focused, "id", None) == "break-input" else self.HINT
            self.query_one("#breaks-hint", Label).update(hint + left_out(self.gone))
            if why:  # the box too, where the typing is (a spec typed there was sent: the eighteenth walk's leftovers, 1)
                self.query_one("#break-input", Input).placeholder = self.NOT_ADDED.format(why)

    def say_ended(self) -> None:
        """The hint says the end where the panel shows its breakpoints (a note above them said
        `this panel was not shown while it ran, so it has nothing to show` over their rows)."""
        if self.rows is None:
            super().say_ended()

    def on_resize(self) -> None:  # (its columns come with its first rows: fitted.fill_fitted)
        if self.rows is not None:
            self.show(self.rows)

    def show(self, rows: list[dict[str, Any]]) -> None:
        """The specs wrap in their column, and kind then checked at are left out where the width is
        short (at 80x24 a long spec cut `before_backwa`, the sixteenth walk's 8)."""
        try:
            t, self.rows = self.query_one(DataTable), rows
        except NoMatches:  # the window closed while the answer was on its way (the suite's red of 2026-11-27)
            return
        row = t.cursor_row  # the cursor stays where it was (a space toggles the row under it)
        cells = [[Text(c) for c in ("●" if r["enabled"] else "○", r["spec"], r["kind"], r["phase"])] for r in rows]
        gone = fill_fitted(t, self, ("on", "spec", "kind", "checked at"), cells, [r["spec"] for r in rows],
                           flexible=1, drop=(2, 3), narrowest=24)
        self.gone = gone
        t.set_class(not rows, "-empty")
        self._says_where_keys_go(self.screen.focused)
        if rows:
            t.move_cursor(row=min(row, len(rows) - 1))
        quiet = "\n".join(f"{r['spec']}: {quiet_words(r['quiet'])}" for r in rows if r.get("quiet"))
        if quiet != self.quiet:  # (the console's `break` says the same, from the same record)
            self.quiet = quiet
            self.say(self.words)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "break-input":
            self.say(check_spec(event.value) or self.said)
            if event.value:  # (the box emptied at Enter keeps it; the next spec typed replaces it)
                self.said = ""

    @on(Input.Submitted, "#break-input")
    def submitted(self, event: Input.Submitted) -> None:
        spec = event.value.strip()
        if spec:
            self.run_worker(self.add(self.app.source, spec), group="breaks")  # type: ignore[attr-defined]

    async def add(self, source: Any, spec: str) -> str | None:
        """Add a breakpoint: None, or the agent's refusal (shown where it was typed too). After
        the job's end, or once it is gone, nothing is sent: the box, emptied at Enter, says so
        (its placeholder); the spec was sent, and the refusal said `[Errno 32] Broken pipe`."""
        if why := no_job(self.app):
            return self.NOT_ADDED.format(why)
        t = self.query_one(DataTable)
        had = {str(t.coordinate_to_cell_key(Coordinate(r, 0)).row_key.value) for r in range(t.row_count)}
        try:
            await source.add_break(spec)
        except Exception as e:
            self.said = error = getattr(e, "message", None) or str(e)
            self.say(error)
            box = self.query_one("#break-input", Input)
            if not box.value:  # (emptied at Enter: the refused spec is back to be mended; its change says the error)
                box.value = spec  # the cursor at its end: it went to its start, `5` typed made `5loss>`,
                box.cursor_position = len(spec)  # and ctrl+u cleared nothing (the nineteenth walk's 2)
            return error
        if (same := parse(spec).spec) in had:  # (it said nothing: the fifth walk's 14)
            self.said = f"{same} is there already: not added again (escape: the table; space turns it on or off)"
            self.say(self.said)
        await self.load(source, {}, [])
        # The focus stays in the box: what is typed next is the next spec, never a key that
        # steps the job (escape goes to the table: space toggles, delete removes).
        return None

    def on_key(self, event: Key) -> None:
        t = self.query_one(DataTable)
        if self.screen.focused is not t or not t.row_count or event.key not in ("space", "delete"):
            return
        spec = str(t.coordinate_to_cell_key(t.cursor_coordinate).row_key.value)
        enabled = str(t.get_cell_at((t.cursor_row, 0))) == "●"
        self.run_worker(self._change(self.app.source, spec, None if event.key == "delete" else not enabled),  # type: ignore[attr-defined]
                        group="breaks")
        event.stop()

    async def _change(self, source: Any, spec: str, enabled: bool | None) -> None:
        """Turn a breakpoint on or off, or remove it (enabled None)."""
        request = source.remove_break(spec) if enabled is None else source.enable_break(spec, enabled)
        await ask(self, "breakpoint", request)
        await self.load(source, {}, [])
        self.say(check_spec(self.query_one("#break-input", Input).value))  # the list changed: a note
        # of the one before goes (`nan is there already` stayed after nan was deleted: the eighth walk's 4)
        # The focus stays on the table, emptied or not: the next keys are keys, not a spec typed,
        # and Tab goes to the add box (the focus set on nothing after the last delete, Tab went to
        # the empty table, which showed no focus, and the `n` after it stepped the job: the
        # nineteenth walk's 1).
