"""The Plots panel: loss, grad norm, LR, data wait and step time over the steps kept,
drawn by plotext (textual-plotext) with value axes, a log scale where a series spans
decades, and the break marked on the curve by a red line at its step."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Label
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

from stepdbg.wire.ops import HISTORY_LIMIT

from .asking import Loads, ask
from .messages import with_records

PLOTS = (("loss", "loss"), ("grad_norm", "grad norm"), ("lr", "lr"), ("data_wait", "data wait s"),
         ("step_time", "step time s"))
LOG_SPAN = 100.0  # a series whose largest value is this many times its smallest is drawn on a log scale
DRAWN_MOST = 400  # points of a series handed to plotext at most (a 160-column plot is 312 dots wide)
RECORD_KEPT = HISTORY_LIMIT  # the steps the Plots keep: all the job keeps and answers (10,000)


def value_of(record: dict[str, Any], key: str) -> Any:
    """A step record's value of `key` (an LR list gives its group 0); an integer too large
    for a float, infinite (the job's word: float() and `:g` raised on it, and the TUI ended)."""
    v = record.get(key)
    v = (v[0] if v else None) if isinstance(v, list) else v
    if isinstance(v, int) and abs(v) > sys.float_info.max:
        return math.inf if v > 0 else -math.inf
    return v


def split(history: list[dict[str, Any]], key: str) -> tuple[list[int], list[float], list[int], list[int]]:
    """In one walk of the history: the steps and finite values of one series, the steps whose
    value is nan or inf (not drawn: the caption says them; the wire carries them as the strings
    "nan", "inf", "-inf", strict JSON) and the steps with no value (None)."""
    steps: list[int] = []
    values: list[float] = []
    bad: list[int] = []
    none: list[int] = []
    for h in history:
        step, v = h.get("step"), value_of(h, key)
        if not isinstance(step, int):
            continue
        if isinstance(v, (int, float)) and math.isfinite(v):
            steps.append(step)
            values.append(float(v))
        elif v in ("nan", "inf", "-inf") or isinstance(v, float):
            bad.append(step)
        elif v is None:
            none.append(step)
    return steps, values, bad, none


def points(history: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """The steps and finite values of one series."""
    steps, values, _, _ = split(history, key)
    return steps, values


def last_step(history: list[dict[str, Any]]) -> int | None:
    """The history's last step (None: it has none)."""
    return next((h["step"] for h in reversed(history) if isinstance(h.get("step"), int)), None)


def not_finite(history: list[dict[str, Any]], key: str) -> list[int]:
    """The steps whose value of `key` is nan or inf."""
    return split(history, key)[2]


# Series the job measures only when asked (each a host read on an accelerator), and why a
# step has no value: the gradient norm (Session.needs_grad_norm). Attached at step 19 of a
# served job, the plot began at step 19 under a loss from step 0, without a word.
ON_DEMAND = {"grad_norm": "the job measures it only while a front end is attached or a breakpoint reads it"}


def unmeasured(none: list[int], key: str) -> list[int]:
    """The steps with no value (`none`, split's) of an on-demand series: not measured, not a NaN."""
    return none if key in ON_DEMAND else []


def unmeasured_words(key: str, missing: list[int], steps: list[int]) -> str:
    """'measured from step 19: the job measures it only while ...', or the steps it was not."""
    if not missing:
        return ""
    if steps and missing[-1] < steps[0] and missing[-1] - missing[0] == len(missing) - 1:
        return f"measured from step {steps[0]}: {ON_DEMAND[key]}"
    return f"not measured at {steps_words(missing)}: {ON_DEMAND[key]}"


def steps_words(steps: list[int]) -> str:
    """'step 30', 'steps 30–59' (a run), or '12 steps, 30 to 59'."""
    if len(steps) == 1:
        return f"step {steps[0]}"
    if steps[-1] - steps[0] == len(steps) - 1:
        return f"steps {steps[0]}–{steps[-1]}"
    return f"{len(steps)} steps, {steps[0]} to {steps[-1]}"


def log_scale(values: list[float]) -> bool:
    """Loss and norms that span decades are read on a log scale; it needs values above 0."""
    return bool(values) and min(values) > 0 and max(values) / min(values) >= LOG_SPAN


def step_ticks(first: int, last: int, most: int = 6) -> list[int]:
    """Whole steps for the x axis: at most `most`, on a round stride."""
    span = max(1, last - first)
    stride = next(s for s in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10_000, 10**5, 10**6,
                              10**9) if span / s <= most - 1)
    return list(range(first - first % stride + (stride if first % stride else 0), last + 1, stride))


def decade_ticks(lo: float, hi: float, most: int = 7) -> tuple[list[float], list[str]]:
    """Powers of ten between `lo` and `hi` for a log axis (1e-4, 0.01, 1, 100, 1e4…). Only
    within the values' range: plotext puts a tick outside it on the frame, where 0.1 sat on
    the x axis's row under a loss whose least value was 0.31 (a log scale spans two decades
    at least, so two ticks at least are inside)."""
    first, last = math.ceil(math.log10(lo)), math.floor(math.log10(hi))
    stride = max(1, math.ceil((last - first + 1) / most))
    ks = range(first, last + 1, stride)
    return [10.0 ** k for k in ks], [f"{10.0 ** k:g}" if -3 <= k <= 3 else f"1e{k}" for k in ks]


def num(v: float) -> str:
    return f"{v:.3g}"


def caption(title: str, steps: list[int], values: list[float], log: bool, break_step: int | None,
            nonfinite: list[int] | None = None, missing: str = "", at_break: Any = None, every: int = 1) -> str:
    """The words above a plot: the range of steps and values, the scale, where the break is
    and its value there (`at_break`, of a step not finished: not in the steps), the steps whose
    value is not finite (after a NaN at step 30 the plot said steps 0–29 of a job that ran to
    59), why steps have no value (`missing`: unmeasured_words), and that the plot draws the
    least and most of each `every` steps (downsample's)."""
    bad = "; ".join(w for w in (f"not finite at {steps_words(nonfinite)} (not drawn)" if nonfinite else "", missing)
                    if w)
    there = "" if at_break is None else (
        f"at the break: {num(at_break) if isinstance(at_break, (int, float)) else at_break}")
    if not values:
        told = f"{title}: {bad or 'no data yet'}"
        return f"{told} · step {break_step}, {there}" if there and break_step is not None else told
    if len(values) == 1:
        text = f"{title}: step {steps[0]}, {num(values[0])}"
    else:
        text = (f"{title}: steps {steps[0]}–{steps[-1]}, {num(min(values))} … {num(max(values))}, "
                f"last {num(values[-1])}")
    if log:
        text += " · log scale"
    if every > 1:
        text += f" · downsampled: least and most of each {every} steps"
    if break_step is not None:
        text += f" · break at step {break_step} " + ("(red line)" if break_step >= steps[0] else "(before the plot)")
        text += f", {there}" if there else ""
    return text + (f" · {bad}" if bad else "")


class StepPlot(PlotextPlot):
    """A plot drawn afresh from its data on every render. plotext changes a figure while it
    builds it (a log scale is applied to the stored values in place), so building one figure
    twice, as any resize or refresh does, drew log10(log10(y)) or raised; and an exception in
    render would end the whole app. A plot that cannot be drawn says so in its place."""

    draw: Callable[[Plot], None] | None = None

    def render(self) -> Any:
        self.plt.clear_figure()
        try:
            if self.draw is not None:
                self.draw(self.plt)
            return super().render()
        except Exception as exc:  # plotext's bug, not the user's: the TUI stays up
            return Text(f"this plot could not be drawn: {type(exc).__name__}: {exc}", style="dim")


HELD = ("lr",)  # series set once a step and held (the LR): drawn as a staircase


def staircase(steps: list[int], values: list[float]) -> tuple[list[int], list[float]]:
    """The points of a series held from one step to the next: a change at step s is a
    vertical line at s (a line from point to point drew lr_explode's LR cut at one step as a
    ramp over the step before it)."""
    xs, ys = steps[:1], values[:1]
    for step, value, before in zip(steps[1:], values[1:], values, strict=False):
        if value != before:
            xs.append(step)
            ys.append(before)
        xs.append(step)
        ys.append(value)
    return xs, ys


def downsample(steps: list[int], values: list[float], most: int = DRAWN_MOST) -> tuple[list[int], list[float], int]:
    """The points of a series to draw, in step order, at most `most` of them: where it has more,
    the least and the most value of each of most // 2 equal spans of steps (a spike stays), and
    how many steps a span holds (1: every point is drawn). plotext's work grows with the points
    and the line's length in cells between them, which step order within the x range bounds."""
    if len(steps) <= most:
        pairs = sorted(zip(steps, values, strict=True), key=lambda p: p[0])
        return [p[0] for p in pairs], [p[1] for p in pairs], 1
    spans = most // 2
    lo, width = min(steps), max(steps) - min(steps) + 1
    least: dict[int, tuple[int, float]] = {}
    largest: dict[int, tuple[int, float]] = {}
    for step, value in zip(steps, values, strict=True):
        k = (step - lo) * spans // width
        if k not in least or value < least[k][1]:
            least[k] = (step, value)
        if k not in largest or value > largest[k][1]:
            largest[k] = (step, value)
    pairs = sorted({*least.values(), *largest.values()}, key=lambda p: p[0])
    return [p[0] for p in pairs], [p[1] for p in pairs], math.ceil(width / spans)


def drawing(steps: list[int], values: list[float], log: bool, break_step: int | None,
            label: Callable[[list[float]], list[str]] | None = None, held: bool = False) -> Callable[[Plot], None]:
    """The plotext calls that draw one series, to run on a cleared figure; `label` writes
    the value axis's numbers (sizes in bytes, for memory), each tick's apart; a `held`
    series is drawn as a staircase. The points are downsampled and in step order, the x range
    from the least step to the most: a break's value put after the steps, at the break's step
    2,470 steps before them, made the range one step wide, and plotext joined each point to the
    next across the whole plot (888,000 cells, 9 s a plot, the TUI frozen)."""

    def draw(plt: Plot) -> None:
        if not values:
            return
        xs, ys, _ = downsample(steps, values)
        plt.plot(*(staircase(xs, ys) if held else (xs, ys)), marker="braille")
        plt.yscale("log" if log else "linear")
        if log:
            plt.yticks(*decade_ticks(min(ys), max(ys)))
        elif label is not None:
            lo, hi = min(ys), max(ys)
            ticks = [lo + (hi - lo) * k / 4 for k in range(5)] if hi > lo else [lo]
            plt.yticks(ticks, label(ticks))
        first, last = xs[0], xs[-1]
        if break_step is not None and break_step >= first:  # inside the frame, not on its edge
            plt.vline(break_step, "red")
            # The word on the side of the line with room for it: at the left of a long run,
            # right-aligned, it ran under the value axis (`1000┤ak⢇`).
            left = (break_step - first) * 2 < max(break_step, last) - first
            plt.text("break", break_step, max(ys), color="red", alignment="left" if left else "right")
            last = max(break_step, last)
            last += max(1, (last - first) // 20)
        last = max(last, first + 1)  # one step: a frame around it (plotext divides by the span)
        plt.xlim(first, last)
        plt.xticks(step_ticks(first, last))

    return draw


class PlotsPanel(Loads, VerticalScroll):
    DEFAULT_CSS = """
    PlotsPanel PlotextPlot { height: 11; margin-bottom: 1; }
    PlotsPanel Label { width: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Label("", id="plots-unfinished", classes="hint")
        for key, title in PLOTS:
            yield Label(title, id=f"plot-{key}-label", classes="hint")
            yield StepPlot(id=f"plot-{key}")

    break_step: int | None = None  # the last break the job paused at: marked until the next, its end included
    break_scalars: dict[str, Any] = {}  # that break's values (its step not finished: not in the history)
    # The whole run's step records, the last RECORD_KEPT (the app keeps its last 500: after
    # 3,000 steps of a NaN from step 30 on the plots showed steps 2500–2999, all NaN, over
    # empty boxes). Replaced, never changed in place.
    record: list[dict[str, Any]] = []
    asked_whole = False  # the job was asked for its whole record once (attached after its first steps)

    def on_mount(self) -> None:  # (a break while another panel is shown counts: the plots mark it when shown)
        self.watch(self.app, "status", self._status_changed)

    def take(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The record with the app's history in it (its steps replace theirs, as a rewind's do).
        Called at each change of the status, as each step event makes one while the job runs,
        so no step leaves the app's 500 before it is here."""
        if history and (not self.record or history[-1] is not self.record[-1]):
            self.record = with_records(self.record, history, RECORD_KEPT)
        return self.record

    def unfinished(self, status: dict[str, Any], history: list[dict[str, Any]]) -> None:
        """Once the job has ended, the words that it did (the plots kept the look of a live
        job: the fifth walk's 11) and what they show, its record to its end; and where it
        ended inside a step (an interrupt at a pause), that the step did not finish (the
        header said step 50, the plots ended at 49 without a word). A record at its most
        says that it holds the last steps only."""
        last = last_step(history)
        step = status.get("step")
        ended = str(status.get("state", "")).startswith("exited")
        words = ""
        if ended:
            state = str(status["state"]).replace("exited (", "ended (exit code ")
            words = f"the job has {state}: the plots are its record to its end" + (
                f", step {last}" if last is not None else ", which sent no steps")
            if isinstance(step, int) and (last is None or step > last):
                words += f"; the job ended in step {step}, which did not finish: it has no values here"
        if len(history) >= RECORD_KEPT:
            words += ("; " if words else "") + f"the plots keep the last {RECORD_KEPT:,} steps, from step {history[0].get('step')}"
        note = self.query_one("#plots-unfinished", Label)
        note.update(words)
        note.display = bool(words)

    def _status_changed(self, status: dict[str, Any]) -> None:
        """A break marks its step; a pause asked for (p, n, s: its condition is `pause`) is
        not a break, and was drawn as one."""
        brk = status.get("paused")
        if isinstance(brk, dict) and isinstance(brk.get("step"), int) and brk.get("condition") != "pause":
            self.break_step, self.break_scalars = brk["step"], brk.get("scalars") or {}
        self.unfinished(status, self.take(getattr(self.app, "history", [])))

    async def load(self, source: Any, status: dict[str, Any], history: list[dict[str, Any]]) -> None:
        """Attached to a job after its first steps (the app asks for its last 500), the job's
        whole record, once, while it runs."""
        self._status_changed(status)
        record = self.take(history)
        first = record[0].get("step") if record else None
        if isinstance(first, int) and first > 0 and not self.asked_whole and not self.job_ended():
            self.asked_whole = True
            whole = await ask(self.app, "history", source.get_history(RECORD_KEPT))
            if whole:  # (the steps that came while it was on its way stay on top of it)
                self.record = with_records(whole, self.record, RECORD_KEPT)
        self.show(history, None)

    def show(self, history: list[dict[str, Any]], break_step: int | None) -> None:
        """The plots of the record with `history` in it, the break at `break_step` marked, or
        else the last break seen (once the job has ended its status has no pause: the break
        went from the plots). Its cost: one walk of the record (at most RECORD_KEPT) a series,
        and at most DRAWN_MOST points a plot."""
        if break_step is not None:
            self.break_step = break_step
        break_step = self.break_step
        record = self.take(history)
        self.unfinished(getattr(self.app, "status", {}), record)
        for key, title in PLOTS:
            steps, values, bad, none = split(record, key)
            at_break = self.at_break(record, key)
            drawn = (steps, values)  # (with the break's value, where it is a number: a point at the red line)
            if isinstance(at_break, (int, float)) and math.isfinite(at_break) and break_step is not None:
                drawn = ([*steps, break_step], [*values, float(at_break)])
            log = log_scale(drawn[1])
            self.query_one(f"#plot-{key}-label", Label).update(
                caption(title, steps, values, log, break_step, bad, unmeasured_words(key, unmeasured(none, key), steps),
                        at_break, every=downsample(*drawn)[2]))
            widget = self.query_one(f"#plot-{key}", StepPlot)
            widget.draw = drawing(*drawn, log, break_step, held=key in HELD)
            widget.refresh()

    def at_break(self, history: list[dict[str, Any]], key: str) -> Any:
        """The break's value of `key` while its step is not finished (after the history's last
        step): the plots ended at the step before, and the grad-norm hint sent the person to
        them for a value they did not draw (the closing walk's 14). None once the history has
        passed it: a break at step 30 under a history that held steps 2500–2999 only was taken
        for a step not finished, its value drawn after step 2999 (the freeze `drawing` tells of)."""
        v = value_of(self.break_scalars, key)
        last = last_step(history)
        if v is None or self.break_step is None or last is not None and self.break_step <= last:
            return None
        return v
