"""The Tensor panel: a tensor's summary, histogram and values at a slice, by any name the
paused frame or the other panels give it (loss, model.head[0].weight, head.0.weight)."""

from __future__ import annotations

import re
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.events import Key
from textual.widget import Widget
from textual.widgets import Input, Label, Sparkline, Static

from stepdbg.client.info_text import num
from stepdbg.client.tensor_text import counted, finite_text, sampled_text, shard_text

from .asking import Loads, ask
from .fields import Field

FIRST = "its first parameter"  # (a module opened from the Model panel: panels.first_parameter_words)


def render_summary(s: dict[str, Any]) -> Text:
    if s.get("words"):
        return Text(s["words"])
    if s.get("type") == "NoneType":  # (the loss before the forward has run): said in words
        return Text(f"{s.get('name')} is None here: no tensor to show yet")
    if s.get("type") != "Tensor":
        kind = str(s.get("type"))
        return Text(f"{s.get('name')} is {'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}, not a tensor: "
                    f"{s.get('repr', '')}")
    t = Text()
    t.append(f"{s['name']}", style="bold")
    t.append(f"  {s['dtype']} {s['shape']} on {s['device']}{'  requires_grad' if s.get('requires_grad') else ''}"
             f"{shard_text(s)}{sampled_text(s)}\n")
    if s.get("note"):
        t.append(s["note"], style="dim")
        return t
    if "min" in s:
        t.append(f"{finite_text(s)}min {num(s['min'])}  max {num(s['max'])}  mean {num(s['mean'])}  std {num(s['std'])}  "
                 f"norm {num(s['norm'])}\n")
    t.append("nan ", style="dim")
    t.append(str(s.get("nan", 0)), style="red bold" if s.get("nan") else "")
    t.append("  inf ", style="dim")
    t.append(str(s.get("inf", 0)), style="red bold" if s.get("inf") else "")
    t.append(f"  zeros {s.get('zeros', 0)} of {counted(s)}", style="dim")
    return t


# Python's parser, in words (a Memory row's label, a character removed, toasted `not an
# expression (unterminated string literal (detected at line 1))`: the fifth walk's 7).
# Its words that are words already (`'(' was never closed`) stay.
PARSER_WORDS = (("unterminated string literal", "a quote is left open"),
                ("unterminated triple-quoted string", "a quote is left open"),
                ("invalid syntax", "it is not written as Python"), ("invalid decimal literal", "it is not written as Python"),
                ("invalid character", "a character Python does not take"), ("unexpected EOF", "it ends too soon"))
NOT_PYTHON = re.compile(r"not an expression \((.*)\)$")


def in_words(message: str) -> str:
    """A request's error with Python's parser message said in words: what is wrong with the
    name typed (not Python, and not a name the other panels give)."""
    m = NOT_PYTHON.search(message)
    if not m or "was never closed" in m.group(1) or "does not match" in m.group(1):
        return message
    why = next((words for said, words in PARSER_WORDS if m.group(1).startswith(said)), "it is not written as Python")
    return f"{message[:m.start()]}not an expression ({why}), nor the name of a row of the Memory or Model panel"


class NameField(Field):
    """The Tensor panel's name field, which its number key (3) gives the focus: what is typed
    after 3 is a name (the panel had it, where keys act on the job, and `loss` typed there
    opened the LR dialog with `oss` in it: the twentieth walk's 1). A digit that would begin
    the name (over the name selected as the focus came, or in an empty field) is a number
    key, as no name begins with one (3 then 2 shows the Model panel: it typed a 2 here, the
    eighth walk's 1); after the name's first character digits type."""

    async def _on_key(self, event: Key) -> None:  # (before Field's and Input's: Textual calls each class's)
        # (the app's binding, run here: Textual leaves a key a field types out of the bindings)
        action = next((b.action for b in self.app.BINDINGS if isinstance(b, Binding) and b.key == event.key), "")
        if self.app.focused is self and str(event.character).isdigit() and min(self.selection) == 0 and action:
            event.stop()
            event.prevent_default()
            await self.app.run_action(action)


class TensorPanel(Loads, Vertical):
    DEFAULT_CSS = """
    TensorPanel { overflow-y: auto; }
    TensorPanel .inputs { height: 3; }
    TensorPanel #tensor-name { width: 1fr; }
    TensorPanel #tensor-index { width: 24; }  /* its words whole at 80 columns (`slice, e.g. 0, :8`), and the name's beside it */
    TensorPanel #tensor-summary { height: auto; margin: 1 0; }
    TensorPanel Sparkline { height: 3; }
    TensorPanel #tensor-hist, TensorPanel #tensor-hist-label, TensorPanel #tensor-slice,
    TensorPanel #tensor-refused { display: none; }
    TensorPanel #tensor-slice, TensorPanel #tensor-refused { height: auto; }
    TensorPanel #tensor-refused { margin-top: 1; }
    """

    # Where typed keys go, said where they go (3 then 4 typed a 4 into the name: the walk's item 26)
    HINT = "Enter: show it · Tab: the slice · escape: keys again (here number keys type)"
    # ...and where they do not (the fifth walk's 1: after Enter on a Model row the hint above
    # showed while `n`, typed to edit the name, stepped the job), wherever the focus is (the
    # sixth walk's 11: in the slice field, or on the REPL line, it said another's)
    KEYS_HINT = "keys act on the job here (n steps it) · Tab: type in the name field"
    HINTS = {"tensor-name": HINT,
             "tensor-index": "Enter: show it · Tab: the REPL line · escape: keys again (here number keys type)"}
    ELSEWHERE_HINT = "typing goes to the line with the focus · escape, then Tab: the name field"

    def compose(self) -> ComposeResult:
        with Horizontal(classes="inputs"):
            yield NameField(placeholder="tensor: loss, batch, x, model.head[0].weight.grad", id="tensor-name")
            yield Field(placeholder="slice, e.g. 0, :8", id="tensor-index")  # (an example, not the slice applied)
        yield Label(self.KEYS_HINT, id="tensor-hint", classes="hint")
        yield Static(id="tensor-refused")  # (under the box, where it is seen at 80x24: the values are
        yield Static(id="tensor-summary")  # below the fold under a summary and histogram, the 18th walk's 1)
        yield Label("", id="tensor-hist-label", classes="hint")
        yield Sparkline([], id="tensor-hist")
        yield Static(id="tensor-slice")

    def on_mount(self) -> None:
        self.says_its_end()
        self.watch(self.screen, "focused", self._says_where_keys_go)

    held: list[str] | None = None  # while a name is opened: its error, said in the panel, not in a toast

    def notify(self, message: str, *, title: str = "", severity: Any = "information", timeout: float | None = None,
               markup: bool = True) -> None:  # (a request's error, from ask: it quotes what was typed, [ too)
        if self.held is not None:
            self.held.append(in_words(message))
            return
        super().notify(in_words(message), title=title, severity=severity, timeout=timeout, markup=False)

    pause_note = ""  # a pause that came while one of its fields had the focus (pause_words.py)

    def _says_where_keys_go(self, focused: Widget | None) -> None:
        hint = self.KEYS_HINT if focused is self else self.HINTS.get(getattr(focused, "id", None) or "",
                                                                      self.ELSEWHERE_HINT)
        if self.pause_note and getattr(focused, "id", None) in self.HINTS:  # (under the field typed in;
            hint = self.pause_note  # [nan] is no markup)
        self.query_one("#tensor-hint", Label).update(Text(hint))

    def job_paused(self, note: str) -> None:
        """A pause came while its field had the focus (note), or the job went on ("")."""
        self.pause_note = note
        self._says_where_keys_go(self.screen.focused)

    def fields(self, entered: Input.Submitted | None = None) -> tuple[str, str]:
        """The name and the slice typed (what Enter there and Enter on another panel's row open);
        with `entered` (a field's Enter), that field's as it was when Enter came: `loss Enter 9`
        in one read opened `loss9` (the Enter is handled after the letters typed with it)."""
        name, index = (self.query_one(f"#tensor-{w}", Input).value for w in ("name", "index"))
        if entered is not None:
            name, index = (entered.value, index) if entered.input.id == "tensor-name" else (name, entered.value)
        return name.strip(), index.strip()

    async def load(self, source: Any, status: dict[str, Any], history: list[dict[str, Any]]) -> None:
        """At a pause, the loss until a name is typed."""
        field = self.query_one("#tensor-name", Input)
        if status.get("state") == "paused" and not field.value:
            field.value = "loss"
            field.select_all()  # (the focus may be there already: a name typed replaces it, never `lossx`)
            await self.open(source, *self.fields())

    asked = 0  # the latest question: the answer to an earlier one (still on its way) is not shown over it

    async def open(self, source: Any, name: str, index: str, label: str | None = None) -> None:
        """The summary of the expression `name` (shown as `label`), and the values at `index` of a tensor."""
        self.asked = question = self.asked + 1
        self.held = held = []
        try:
            s = await ask(self, f"tensor {label or name}", source.summary(name))
        finally:
            self.held = None if self.held is held else self.held  # (an open begun since holds its own)
        if question != self.asked:
            return
        if s is None:  # its error, where it stays (its toast went, and left `the notice says why`: the tenth
            if not self.job_ended():  # walk's 5), not the tensor shown before under this new name (once ended
                self.say(held[-1] if held else f"{label or name}: nothing to show")  # the panel keeps what it showed)
            return
        values, refused = await self.values(source, name, index) if s.get("type") == "Tensor" else (None, "")
        if label and s.get("name"):  # which parameter, by name (`(root) (Net): its first parameter` named none)
            label = label.replace(FIRST, f"{FIRST} {str(s['name']).split(' (')[0]}", 1)
        if question == self.asked:
            self.show({**s, "name": label or s.get("name")}, values, refused, index)

    good: tuple[str, str] = ("", "")  # the name and the last slice of it the job took

    async def values(self, source: Any, name: str, index: str) -> tuple[list[Any] | None, str]:
        """The values at `index`, or, where the job refuses that slice, the words why and the
        values at the last slice it took of this name, put back in the field (a refused
        slice stayed in the field, over no values, its refusal a toast gone in 6 s); where it
        took none, the field keeps what was typed (it was emptied: the fifth walk's 5), unless
        the field's slice is the one taken of the tensor shown before: then it is emptied,
        and says so, as the values are at the start (it read `40` over another tensor's
        start: the eighteenth walk's 1). The field never shows a slice other than the one applied."""
        said = Said()
        values = await ask(said, "slice", source.slice(name, index, 64))
        if values is not None or not said.message or self.job_ended():
            self.good = (name, index) if values is not None else self.good
            return values, ""
        last = self.good[1] if self.good[0] == name else ""
        carried = not last and self.good[1] == index  # (the slice of the tensor before, not one typed since)
        if last or carried:
            self.query_one("#tensor-index", Input).value = last
        if carried:
            said.message += f" (the slice taken of {self.good[0]} before; the slice field is emptied)"
        values = await ask(self, "slice", source.slice(name, last, 64)) if last != index else None
        return values, (f"refused: {said.message.removeprefix('slice: ')}; "
                        f"the values below are at {repr(last) if last else 'its start'}")

    def say(self, words: str) -> None:
        self.asked += 1  # words in the summary's place (a module without parameters has no tensor to show)
        self.show({"type": None, "words": words}, None)

    def show(self, summary: dict[str, Any], values: list[Any] | None, refused: str = "", index: str = "") -> None:
        """Every part drawn again from this answer; what it has not (a 0-d tensor's histogram,
        a module's values) is hidden, not left as it was. The slice the values are at is
        said (one typed for a tensor stayed applied to the next opened from Mem, unsaid)."""
        self.query_one("#tensor-summary", Static).update(render_summary(summary))
        h = summary.get("hist")
        counts = (h or {}).get("counts") or []
        self.query_one("#tensor-hist", Sparkline).data = counts
        label = self.query_one("#tensor-hist-label", Label)
        label.update(f"histogram {num(h['lo'])} … {num(h['hi'])}" if counts else "")
        label.display = self.query_one("#tensor-hist", Sparkline).display = bool(counts)
        self.query_one("#tensor-refused", Static).update(Text(refused))  # (a slice typed with [ is not markup)
        self.query_one("#tensor-refused", Static).display = bool(refused)
        shown = self.query_one("#tensor-slice", Static)
        lines = []
        if values is not None:
            lines.append("values: " + ", ".join(num(v) for v in values))
            if index and not refused:
                lines.append(f"at the slice {index} typed in the slice field (empty it: the start)")
        shown.update(Text("\n".join(lines)))
        shown.display = bool(lines)


class Said:
    """Where a request's error goes when the panel says it in its own place (not a toast)."""

    message = ""

    def notify(self, message: str, *, severity: Any = None, timeout: float | None = None) -> None:
        self.message = message
