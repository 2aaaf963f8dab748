"""What the screen says of a pause and of the job going on, where the person looks (the
seventh walk's 3 and 4).

A break that came while a field had the focus (the Tensor panel's name or slice, the
REPL line, the Breaks panel's add box) was said in a toast alone, which went: the focus
stays in the field (the rest of the typing is not run as keys: issue 45's (a)), and the
pause and its reason are said under the field (over the REPL line for it) until the job
goes on (and not in a toast too: the same words twice). A resume (c, n, s, R, another
client) is said in the Log as the pause is."""

from __future__ import annotations

from typing import Any

from textual.widgets import Static

from .header import ASKED
from .panels import BreakpointsPanel, TensorPanel


def paused_words(brk: dict[str, Any], shown: bool = False) -> str:
    """'the job paused at step 30 [nan]: loss is nan · escape, then c continues (1 shows the
    break)'; a pause asked for (p, n, s) without its condition; the break `shown` (the Break
    panel is): without `1 shows the break` (said over it after `until 40`: the twentieth walk's 3)."""
    why = "" if brk.get("condition") == ASKED else f" [{brk.get('condition')}]: {brk.get('reason')}"
    return f"the job paused at step {brk.get('step')}{why} · escape, then c continues" + ("" if shown else
                                                                                          " (1 shows the break)")


def resumed_words(brk: dict[str, Any] | None, data: dict[str, Any]) -> str:
    """The Log's line of a resume, as its `paused at step 30 (before_backward)`."""
    brk = brk or {}
    phase = f" ({brk['phase']})" if brk.get("phase") else ""
    return f"resumed at step {brk.get('step', data.get('step'))}{phase}"


def _notes(app: Any) -> tuple[list[Any], list[Static]]:
    main = app.screen_stack[0] if app.screen_stack else None
    if main is None:
        return [], []
    panels = [*main.query(TensorPanel).results(TensorPanel), *main.query(BreakpointsPanel).results(BreakpointsPanel)]
    return panels, list(main.query("#repl-out").results(Static))


def say_in_field(app: Any, brk: dict[str, Any]) -> None:
    """The pause, under the field that has the focus, once (a toast that repeated it took 4 or 5
    of 24 rows beside the same words: the closing walk's 12)."""
    words = paused_words(brk, app.active_panel() == "break")
    panels, outs = _notes(app)
    focused = app.focused
    taken = False
    for panel in panels:
        mine = focused is not None and focused in panel.query("Input").results()
        panel.job_paused(words if mine else "")
        taken = taken or mine
    for out in outs if not taken else []:  # the REPL line, or a field of no panel: over the REPL line
        out.update(words)


def clear(app: Any) -> None:
    """The job went on or ended: the pause's words go (and only they: an answer stays)."""
    panels, outs = _notes(app)
    for panel in panels:
        panel.job_paused("")
    for out in outs:
        if str(getattr(out, "content", "")).startswith("the job paused at step "):
            out.update("")
