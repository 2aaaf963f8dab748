"""The Break panel: why and where the job stopped, the replay's answer (module, op, line),
what to try, the findings, the source around the paused line, the frames and the locals.
Pure ``render_*`` functions, so the words on screen are testable without a terminal."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.padding import Padding
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import Static

from stepdbg.client.info_text import seconds
from stepdbg.wire.change_text import change_words
from stepdbg.wire.conditions import PHASES, SCALAR_PHASE
from stepdbg.wire.replay_text import replayed

from .asking import Loads
from .fitted import focus_mark
from .job_last_break import LastBreak
from .panels import bad, num
from .rank_breaks import FROM_RANK
from .rank_replays import named


def hints(brk: dict[str, Any], replay: dict[str, Any] | None, live: bool = True) -> list[str]:
    """Rule-based hints from the break record and the replay (no guessing beyond them); once
    the job has ended or is gone (not `live`) none invites a key that drove it (`press r to
    replay` stayed on a job killed: the seventeenth walk's 2)."""
    out = []
    d = brk.get("details") or {}
    if d.get("explanation"):
        out.append(d["explanation"])
    if brk.get("condition") == "nan" or "nan" in brk.get("reason", ""):
        if d.get("model_output") == "finite":
            out.append("the model output was finite: look at the loss computation (log of 0, division by 0)")
        if d.get("nonfinite_params"):
            out.append("parameters are already non-finite: the previous update broke them; lower the LR or clip")
        if not replay and live:
            out.append("press r to replay the step and find the op that made the first non-finite value")
    if brk.get("condition", "").startswith("grad_norm"):
        out.append(f"a large gradient norm: lower the LR{' (l, pinned)' if live else ''}, add clipping or warmup; "
                   "see Plots (6)")
    if brk.get("condition", "").startswith("data_wait") or brk.get("condition", "").startswith("stall"):
        out.append("the step waited for data: check num_workers against the cores, and heavy transforms "
                   "(Threads (8) shows the DataLoader's settings and its workers)")
    if brk.get("condition") == "stale_grad":
        out.append("call optimizer.zero_grad() once per optimizer step")
    advice = (replay or {}).get("advice")
    if advice:  # the replay's advice follows the cause: data, divergence, domain, overflow
        out.append(f"{advice['cause']}: {advice['text']}")
    return out


def render_findings(findings: list[dict[str, Any]]) -> list[Text]:
    out = []
    for f in findings:
        t = Text("finding ", style="bold")
        t.append(f"[{f['rule']}] ", style="bold red" if f["severity"] == "error" else "bold yellow")
        t.append(f"{f['message']} ")
        t.append(f"— try: {f['advice']}", style="italic")
        out.append(t)
    return out


def render_break(brk: dict[str, Any] | None, replay: dict[str, Any] | None,
                 findings: list[dict[str, Any]] | None = None, last: dict[str, Any] | None = None,
                 live: bool = True) -> Group | Text:
    """The Break panel's record, in screen order: the break, its scalars, where, the replay,
    the hints and the findings. Running, the last break the panel showed (`last`): after c
    or R it said `no break yet` of a job that had broken (the seventh walk's 4). `live`: the
    job is there (not gone), so the hints may name its keys."""
    if brk is None:
        said = [Text("running — p pauses at the next pause point. The last break:", style="dim"),
                _break_head(last)] if last else [Text("running", style="dim")] if findings else []
        if said or findings:
            return Group(*said, *render_findings(findings or []))
        return Text("running — no break yet. p pauses at the next pause point.", style="dim")
    lines: list[Any] = [_break_head(brk, replay), _break_scalars(brk)]
    if brk.get("lr_now"):  # set at this pause (here, at another client): the LR the next update uses
        lines.append(Text(change_words({**brk["lr_now"], "what": "lr"}), style="bold cyan"))
    if brk.get("skip_step") is not None:  # the job's own state (k here, at another client, --on-break skip)
        lines.append(Text(change_words({"what": "skip", "target_step": brk["skip_step"]}), style="bold cyan"))
    w = brk.get("where")
    if w:
        lines.append(Text(f"at {w['file']}:{w['line']} in {w['function']}", style="dim"))
    if brk.get("paused_at"):  # the rank that broke, paused with every rank at another place (rank_breaks)
        lines.append(Text(paused_at_words(brk["paused_at"]), style="bold"))
    if replay:
        lines += render_replay(replay)
    lines += [bullet(h) for h in hints(brk, replay, live)]
    lines += render_findings(findings or [])
    return Group(*lines)


def bullet(words: str) -> Table:
    """`• words`, its wrapped lines under its words, not under the bullet (a hanging indent: the
    replay's `• domain: ...` went on at the panel's edge, the seventeenth walk's 4)."""
    row = Table.grid()
    row.add_column(width=2, no_wrap=True)
    row.add_column()
    row.add_row("•", Text(words, style="italic"))
    return row


def paused_at_words(at: dict[str, Any]) -> str:
    """Where every rank paused for this rank's break (the source, stack and locals are there)."""
    w = at.get("where") or {}
    line = f" at {str(w.get('file', '')).rsplit('/', 1)[-1]}:{w.get('line')}" if w else ""
    return f"paused with every rank at step {at.get('step')} ({at.get('phase')}){line}: the source and locals below"


def _whose_replay(brk: dict[str, Any], replay: dict[str, Any]) -> tuple[str, str]:
    """The replay that names a break's producer: the one below, or, on a rank paused for
    another's break, that rank's (this rank's own replay says its step made none: the closing
    walk of 05:50's 3), and how to see it."""
    broke = (brk.get("details") or {}).get("for_rank")
    if broke is None or replay.get(FROM_RANK) in (None, broke):
        return "the replay below", ""
    return f"rank {broke}'s replay", ": t"


def _break_head(brk: dict[str, Any], replay: dict[str, Any] | None = None) -> Text:
    head = Text()
    head.append(f"step {brk['step']} · {brk['phase']} · ", style="bold")
    head.append(f"[{brk['condition']}] ", style="bold magenta")
    reason = replayed(brk["reason"], *_whose_replay(brk, replay)) if replay else brk["reason"]
    head.append(reason, style="bold red" if "nan" in reason or "inf" in reason else "bold")
    return head


# A pause point before the phase that measures a scalar (conditions.SCALAR_PHASE): it is not
# measured yet, said so (a bare `loss -   grad_norm -` at a data_wait break read as if the
# step had none; at after_forward and before_backward too, the eleventh and twelfth walks)
NOT_YET = {"before_forward": "before the forward", "after_forward": "before the backward",
           "before_backward": "before the backward"}


def not_yet(phase: str, s: dict[str, Any]) -> list[str]:
    """Of loss and grad_norm, those the step has not measured at `phase`."""
    if phase not in NOT_YET:
        return []
    return [k for k in ("loss", "grad_norm")
            if s.get(k) is None and PHASES.index(phase) < PHASES.index(SCALAR_PHASE[k])]


def _break_scalars(brk: dict[str, Any]) -> Text:
    s = brk.get("scalars") or {}
    # Said to be the break's: an LR set since (`LR set to 0.002`, the line under it) is not the
    # `lr 0.1` read here, which read as the LR in force (the twelfth walk's 1).
    scal = Text("at the break" + (", " if brk.get("scalars_of") else ": "), style="dim")
    if brk.get("scalars_of"):  # paused for another rank's break: whose numbers these are
        scal.append(f"{brk['scalars_of']}: ", style="bold")
    unmeasured = not_yet(brk.get("phase", ""), s)
    if "loss" not in unmeasured:
        scal.append("loss ")
        scal.append(num(s.get("loss")), style="red" if bad(s.get("loss")) else "green")
        scal.append("   ")
    if "grad_norm" not in unmeasured:
        scal.append(f"grad_norm {num(s.get('grad_norm'))}   ")
    scal.append(f"lr {num((s.get('lr') or [None])[0])}")
    scal.append(f"   data_wait {seconds(s.get('data_wait'))}")
    if unmeasured:  # (info_text.seconds' words, the one place: 'not measured')
        scal.append(f"   {' and '.join(unmeasured)} {seconds(None)} yet ({NOT_YET[brk['phase']]})", style="dim")
    return scal


def ended_words(state: str) -> str:
    """'exited (3)' as a person says it: 'ended (exit code 3)'."""
    return state.replace("exited (", "ended (exit code ")


ELSEWHERE = "another client"  # `interrupted`: the job's change event said a front end not this window sent Ctrl-C


def end_words(state: str, output_shown: bool, interrupted: bool | str) -> str:
    """The Break panel once the job has ended: how, and where what it printed went. After
    an interrupt from this window (True) or another client (ELSEWHERE: `stepdbg attach`'s
    interrupt) its Ctrl-C handling printed where it runs (a served job's said
    `--forward-output`, an option that changes nothing there, and not the Ctrl-C)."""
    if interrupted:
        sent = ("by another client (stepdbg attach)" if interrupted == ELSEWHERE else "from this window (its Ctrl-C dialog)")
        how = f"the job {ended_words(state)} after the Ctrl-C sent {sent}: its own Ctrl-C handling ran"
        log = ("; the Log (9) has what it printed" if output_shown else
               ", and what it printed then (a traceback) is where it runs (its terminal or log), not here")
        return f"{how}{log}; q closes this window."
    log = ("The Log (9) has what it printed while this window was open" if output_shown else
           "Its output went where the job runs, not to this window (a job served with --forward-output "
           "sends it to the Log (9))")
    return f"the job {ended_words(state)}. {log}; q closes this window."


def render_replay(replay: dict[str, Any]) -> list[Any]:
    """The replay's lines of the Break panel: its summary, its verdict, where the value is born."""
    lines: list[Any] = []
    lines.append(Text(""))
    first = replay.get("first_nonfinite") or replay.get("failing_op")
    title = Text(named(replay), style="bold cyan")  # (a rank's names it: rank_replays)
    title.append(replay.get("summary", ""))
    lines.append(title)
    if replay.get("verdict"):
        verdict = Text(replay["verdict"], style="bold" if replay.get("reproduced") is False else "dim")
        lines.append(Padding(verdict, (0, 0, 0, 2)))  # (its wrapped lines keep the indent)
    if first and first.get("where") in ("input", "parameter"):
        t = Text("  tensor ", style="dim")
        t.append(str(first.get("tensor")), style="bold yellow")
        if first.get("index") is not None:
            t.append("  first bad element at ", style="dim")
            t.append(str(first.get("index")), style="bold yellow")
            t.append(f"  ({first.get('count')} in all)", style="dim")
        if first.get("sample") is not None:
            t.append("  dataset index ", style="dim")
            t.append(str(first["sample"]), style="bold yellow")
        lines.append(t)
    elif first:
        t = Text("  module ", style="dim")
        t.append(str(first.get("module") or ("(the program's own code)" if first.get("where") == "program"
                                             else "(loss computation)")), style="bold yellow")
        t.append(f" ({first.get('module_type') or '-'})  op ", style="dim")
        t.append(op_words(first), style="bold yellow")
        t.append("  line ", style="dim")
        t.append(f"{first.get('file')}:{first.get('line')}", style="bold yellow")
        lines.append(t)
        if first.get("code"):
            lines.append(Text(f"  {first['code']}", style="yellow"))
        for ln in first.get("forward_trace") or []:
            lines.append(Text(f"  {ln}", style="dim"))
    return lines


def op_words(first: dict[str, Any]) -> str:
    """The replay's op as the program calls it, with its autograd node where the value was
    born in the backward or the loss (`op sqrt` alone read as if the forward sqrt made it)."""
    op, node, where = str(first.get("op")), first.get("node"), first.get("where")
    if not node or where not in ("backward", "loss"):
        return op
    return f"{op}'s backward ({node})" if where == "backward" else f"{op} ({node})"


def render_source(src: dict[str, Any] | None) -> Syntax | Text:
    if not src or not src.get("lines"):
        return Text("")
    code = "\n".join(ln["text"] for ln in src["lines"])
    first = src["lines"][0]["line"]
    return Syntax(code, "python", line_numbers=True, start_line=first, highlight_lines={src["line"]},
                  theme="ansi_dark", word_wrap=True)  # a long line wraps: cut, its end was out of sight


def render_frames(frames: list[dict[str, Any]] | None) -> Text:
    """The paused stack, outermost first, the selected frame marked (u and d move it)."""
    if not frames or len(frames) < 2:
        return Text("")
    t = Text("stack (u out, d in)\n", style="bold")
    for f in frames:
        mark = "> " if f["selected"] else "  "
        t.append(f"{mark}{f['function']}()  {f['file'].rsplit('/', 1)[-1]}:{f['line']}\n",
                 style="bold" if f["selected"] else "dim")
    return t


def render_locals(rows: list[dict[str, str]] | None) -> Table | Text:
    """The selected frame's locals: name, type, and dtype/shape/device or a short repr; a frame
    with none of the user's (a script's `<module>` of imports and functions) says so (the panel
    showed nothing there, the sixteenth walk's 14)."""
    if rows is None:
        return Text("")
    if not rows:
        return Text("locals: none of yours in this frame (its modules, functions and classes are left out: "
                    "p vars() lists every name)", style="dim")
    table = Table(title="locals", title_justify="left", title_style="bold", box=None, padding=(0, 1))
    table.add_column("name", style="bold")
    table.add_column("type", style="dim")
    table.add_column("value", overflow="fold")
    for r in rows:
        table.add_row(r["name"], r["type"], r["value"])
    return table


class BreakPanel(Loads, VerticalScroll):
    # Unscoped, for one rule outside the panel, on every screen: toasts at the bottom right,
    # under the REPL line, over the footer's key hints (the help says them) and the REPL box's
    # lower border, not over a panel line (toasts.py's rule; Textual's place, one row higher,
    # covered the REPL line, the ninth walk's 18; under the tabs they covered a table's last
    # column, the Breaks panel's `checked at`, and the Break panel's end words at 80x24, the
    # twelfth walk's 4). The panel is always there, so its CSS is always loaded.
    SCOPED_CSS = False
    DEFAULT_CSS = focus_mark("BreakPanel") + """
    #textual-toastrack { dock: bottom; align: right bottom; margin-bottom: 0; }
    BreakPanel #break-record { height: auto; }
    BreakPanel #break-source, BreakPanel #break-frames, BreakPanel #break-locals { height: auto; margin-top: 1; }
    """

    last: dict[str, Any] | None = None  # the last break shown (said, running, under `running`)
    drawn: tuple[dict[str, Any] | None, dict[str, Any] | None, list[dict[str, Any]] | None] = (None, None, None)

    def compose(self) -> ComposeResult:
        yield Static(id="break-record")
        yield Static(id="break-source")
        yield Static(id="break-frames")
        yield Static(id="break-locals")

    def show(self, brk: dict[str, Any] | None, replay: dict[str, Any] | None, src: dict[str, Any] | None,
             findings: list[dict[str, Any]] | None = None, ended: str | None = None,
             frames: list[dict[str, Any]] | None = None, locals_: list[dict[str, str]] | None = None,
             output_shown: bool = False, interrupted: bool | str = False) -> None:
        """`output_shown`: the job's output reaches the Log (a job this window started, or
        one started with --forward-output); `interrupted`: this window sent it Ctrl-C (i:
        True), or another client did (ELSEWHERE)."""
        if brk is not None and self.job_ended():  # a refresh begun at the pause, answered after the end
            return  # (it drew the old break over the end's words)
        if brk is not None and self.app.status.get("state") != "paused":  # a refresh begun at the pause,
            self.last, brk = brk, None  # answered after the job went on (attached as another client continued)
        told = LastBreak.of(self.app)  # (attached while the job ran after a break: its status's last break)
        self.last = brk or self.last or (told.brk if told.late else None)
        self.drawn = (brk, replay, findings)
        try:
            self.query_one("#break-record", Static).update(
                self.record(end_words(ended, output_shown, interrupted) if ended else None))
            self.query_one("#break-source", Static).update(render_source(src) if brk else "")
            self.query_one("#break-frames", Static).update(render_frames(frames) if brk else "")
            self.query_one("#break-locals", Static).update(render_locals(locals_) if brk else "")
        except NoMatches:  # the window closed while the answer was on its way (a worker's late show)
            return

    def record(self, end: str | None = None) -> Group | Text:
        """The break shown (`drawn`); with none, how the job ended (`end`) or that it is gone, and
        its last break, the replay of its step, what was done after it."""
        brk, replay, findings = self.drawn
        gone = getattr(self.app, "gone", None)
        if brk is None and (end or gone):
            told = LastBreak.of(self.app)
            said = told.words(getattr(self.app, "history", []))  # (the end: what was done, as the records have it)
            return Group(Text(end or f"{gone}; q closes this window.", style="bold"), *(Text(w) for w in said[:1]),
                         *(render_replay(told.replay) if said and told.replay else []),
                         *(Text(w) for w in said[1:]))
        return render_break(brk, replay, findings, self.last, live=gone is None)

    def job_gone(self) -> None:
        """The job is gone (job_gone.GoneWatch): its keys are no longer invited; the panel keeps
        what it shows of its last state."""
        for shown in self.query("#break-record").results(Static):
            shown.update(self.record())
