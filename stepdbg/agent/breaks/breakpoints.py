"""Breakpoints: the conditions set, and which of them hold at a pause point.

Conditions are parsed by ``stepdbg.wire.conditions`` (the same grammar on the command
line, in code and in a front end); here they are evaluated against the step model's
scalars, plus the two that look at tensors (non-finite values, stale gradients).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from stepdbg.agent.measure import rank_origin, tensors
from stepdbg.agent.measure.memory import memory_in_use
from stepdbg.agent.replay import param_writes
from stepdbg.agent.replay.autograd_graph import search_input_graph
from stepdbg.agent.step import backward_capture, micro_batches, upstream
from stepdbg.agent.step.step_model import StepModel
from stepdbg.wire import conditions as cond_mod
from stepdbg.wire.conditions import Condition

Hit = tuple[str, str, dict[str, Any]]  # (spec, reason, details)
Raised = Callable[[cond_mod.ExpressionRaised, int], None]  # told of an expression that raised at a step
SPIKE_WINDOW = 50  # steps of the running loss median (loss_spike)
SPIKE_MIN_STEPS = 5


def checked_at(c: Condition) -> tuple[str, ...]:
    """The pause points a condition is checked at (a NaN at two; the watchdog's at none)."""
    return {"nan": ("before_backward", "before_optimizer_step"),
            "stale_grad": ("before_backward",)}.get(c.kind, (c.phase,) if c.phase and c.phase != "any" else ())


class Breakpoints:
    """The conditions of a session, which are on, and which already fired."""

    def __init__(self, specs: Iterable[str | Condition]) -> None:
        self.conditions: list[Condition] = [c if isinstance(c, Condition) else cond_mod.parse(c) for c in specs]
        self.disabled: set[str] = set()
        self.repeats: dict[str, int] = {}  # conditions that stayed true, counted, not reported
        self._fired: dict[str, tuple[int, int]] = {}  # spec: (the step of its break, the last step it held)
        self.told: set[str] = set()  # expr: breakpoints whose expression raised, said once
        self.tell: Callable[[Any], None] = lambda finding: None  # how that is said (the Breaker's bus.finding)
        self._recount()

    # ------------------------------------------------------------------ the set

    def specs(self) -> list[str]:
        return [c.spec for c in self.conditions]

    def _known(self, spec: str) -> None:  # else the refusal, in words (it said "set: ['nan']")
        if spec not in self.specs():
            raise KeyError(f"no breakpoint {spec!r} (the breakpoints are: {', '.join(self.specs()) or 'none'})")

    def add(self, spec: str | Condition) -> Condition:
        """Add a condition; one already set is kept once (a front end's table keys rows by spec)."""
        c = spec if isinstance(spec, Condition) else cond_mod.parse(spec)
        same = next((have for have in self.conditions if have.spec == c.spec), None)
        if same is not None:
            return same
        self.conditions.append(c)
        self._recount()
        return c

    def remove(self, spec: str) -> None:
        self._known(spec)
        self.conditions = [c for c in self.conditions if c.spec != spec]
        self.disabled.discard(spec)  # added again later, it is on
        self._fired.pop(spec, None)  # ... and starts fresh: its first hit is a break, not a repeat
        self.told.discard(spec)
        self._recount()

    def enable(self, spec: str, enabled: bool = True) -> None:
        self._known(spec)
        if enabled and spec in self.disabled:
            self._fired.pop(spec, None)  # turned on again, it starts fresh (as one added again)
        (self.disabled.discard if enabled else self.disabled.add)(spec)
        self._recount()

    def listing(self) -> list[dict[str, Any]]:
        """Each breakpoint with its kind, where it is checked, whether it is on and, for one that stayed
        true after its break (not reported again), `quiet`: [the break's step, the last step it held]."""
        return [{"spec": c.spec, "kind": c.kind, "phase": ", ".join(checked_at(c)) or "-",
                 "enabled": c.spec not in self.disabled, "quiet": self.quiet(c.spec)} for c in self.conditions]

    def first(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.kind == kind), None)

    def _by_phase(self) -> dict[str, list[Condition]]:
        """The conditions that are on, by the pause point they are checked at (a NaN at two)."""
        at: dict[str, list[Condition]] = {}
        for c in self.conditions:
            if c.spec in self.disabled:
                continue
            for phase in checked_at(c):
                at.setdefault(phase, []).append(c)
        return at

    def _recount(self) -> None:
        """What the hot path asks, kept up to date as conditions are added, removed, toggled."""
        self._grad_norm_read = self._reads_grad_norm()
        self.at = self._by_phase()  # read at every pause point: the conditions on, by where they are checked
        # The pause points the breaker is asked at while running free (the activation watch
        # reads the output after the forward, or with the step's one read before the update).
        self.watched = frozenset(self.at) | (
            frozenset({"after_forward", "before_backward", "before_optimizer_step"}) if "forward" in self.at
            else frozenset())
        self._loss_at_backward = any("loss" in c.reads for c in self.at.get("before_backward", ()))
        # --skip-on-device (device_skip.py): the grad_norm>X limits when every condition checked
        # before the update is one the device decides (nan, grad_norm>X); else None.
        update = self.at.get("before_optimizer_step", [])
        self.limits_on_device = [c.threshold for c in update if c.kind == "grad_norm"] \
            if all(c.kind in ("nan", "grad_norm") for c in update) else None
        # What check() runs: each condition made once into a test of the step at its pause point.
        self._tests = {phase: [_test(c, phase, self._raised) for c in cs if c.kind != "activations"] for phase, cs in self.at.items()}

    def reads_loss_at_backward(self) -> bool:
        """Whether a condition on the loss is checked before backward (loss>X, loss_spike, an expression): then the loss is read there, also on an accelerator."""
        return self._loss_at_backward

    def reads_grad_norm(self) -> bool:
        """Whether any condition needs the step's gradient norm (it costs a host sync)."""
        return self._grad_norm_read

    def _reads_grad_norm(self) -> bool:
        return any(c.kind in ("nan", "grad_norm") or "grad_norm" in c.names for c in self.conditions)

    # ------------------------------------------------------------------ checking

    def repeat(self, spec: str, step: int) -> bool:
        """True when `spec` fired in this step or the one before: a NaN that stays, or a norm that stays
        high, is one break, not one per step. The steps it stayed true on are counted in the end event."""
        since, last = self._fired.get(spec, (None, None))
        self._fired[spec] = (step, step)
        if since is not None and last is not None and step - last <= 1 and not spec.startswith(("step", "every")):
            self._fired[spec] = (since, step)
            if step != last:  # (held at two pause points of one step: not one more step)
                self.repeats[spec] = self.repeats.get(spec, 0) + 1
            return True
        return False

    def quiet(self, spec: str) -> list[int] | None:
        """[the step of `spec`'s break, the last step it held] where it held after its break, else None."""
        since, last = self._fired.get(spec, (0, 0))
        return [since, last] if last > since else None

    def mark_fired(self, spec: str, step: int) -> None:
        self._fired[spec] = (step, step)

    def forget_fired(self) -> None:
        """The run went back (a rewind): a condition that holds after it is a new break, not
        a repeat (a break after a rewind goes further back)."""
        self._fired.clear()

    def _raised(self, e: cond_mod.ExpressionRaised, step: int) -> None:
        """An expr: breakpoint's expression raised at `step`: it did not hold; said once (a finding), it stays on."""
        spec = e.condition.spec
        if spec in self.told:
            return
        self.told.add(spec)
        self.tell(ExpressionFinding(step=step, message=(
            f"breakpoint '{spec}' at step {step}: {e}; it did not break there, and it stays on: checked at the "
            "next steps, where a raise counts as false (said this once)"), advice=(
            "guard the expression where it raises (a test that is false there, then 'and'), or remove the "
            "breakpoint (Breaks: delete; the console: break rm SPEC)"), data={"spec": spec}))

    def check(self, phase: str, model: StepModel) -> list[Hit]:
        """Every condition that holds at `phase`, each with its reason, in the order set."""
        hits = (test(model) for test in self._tests.get(phase, ()))
        return [hit for hit in hits if hit is not None]


@dataclass(frozen=True)
class ExpressionFinding:
    """An expr: breakpoint whose expression raised, with a doctor's finding's fields (bus.finding)."""

    step: int
    message: str
    advice: str
    data: dict[str, Any] = field(default_factory=dict)
    rule: str = "breakpoint_raised"
    severity: str = "warning"


def _test(c: Condition, phase: str, raised: Raised) -> Callable[[StepModel], Hit | None]:
    """Condition `c` at `phase` as a test of the step: its hit, or None. Made once when the
    set changes, run at every step (four pause points a step under the default watch): a
    threshold reads its one scalar, and the condition's own wording is asked for only when
    it fires."""
    if c.kind == "nan":
        return _nan_loss(c.spec, phase) if phase == "before_backward" else _nan_update(c.spec, phase)
    if c.kind == "stale_grad":
        return _stale(c.spec)
    if c.kind in cond_mod.ABOVE_KINDS:
        return _above(c)
    return _scalars(c, raised)


def _nan_loss(spec: str, phase: str) -> Callable[[StepModel], Hit | None]:
    def nan_loss(m: StepModel) -> Hit | None:
        losses = m.current.losses if m.current else ()
        if not losses or math.isfinite(losses[-1]):
            return None
        found = nonfinite(phase, m)
        return (spec, *found) if found else None
    return nan_loss


def _nan_update(spec: str, phase: str) -> Callable[[StepModel], Hit | None]:
    def nan_update(m: StepModel) -> Hit | None:
        st = m.current
        if st is None or (math.isfinite(sum(st.losses)) and (st.grad_norm is None or math.isfinite(st.grad_norm))):
            return None  # (a finite sum settles the losses: a NaN or inf makes it non-finite)
        found = nonfinite(phase, m)
        return (spec, *found) if found else None
    return nan_update


def _stale(spec: str) -> Callable[[StepModel], Hit | None]:
    def stale(m: StepModel) -> Hit | None:
        reason = stale_grad(m)
        return (spec, reason, {}) if reason else None
    return stale


def _above(c: Condition) -> Callable[[StepModel], Hit | None]:
    spec, kind, read, limit = c.spec, c.kind, _SCALARS[c.kind], c.threshold

    def above(m: StepModel) -> Hit | None:
        v = read(m, m.current)
        if v is None or not v > limit:
            return None
        return (spec, c.check({"step": m.step, kind: v}) or "", {})
    return above


def _scalars(c: Condition, raised: Raised) -> Callable[[StepModel], Hit | None]:
    def scalars(m: StepModel) -> Hit | None:
        try:
            reason = c.check(step_scalars(m, c.reads))
        except cond_mod.ExpressionRaised as e:
            raised(e, m.step)
            return None
        return (c.spec, reason, {}) if reason else None
    return scalars


def replayed(reason: str) -> str:  # a break whose actions replay its step: its reason's hint says so
    return reason.replace("(replay the step to ", "(the replay that follows will ").replace("; replay the step to ", "; the replay that follows will ")


def _input_words(model: StepModel, bad_inputs: list[torch.Tensor], details: dict[str, Any]) -> str:
    """Why a non-finite model input is there: another model's output (a GAN's netD fed netG's),
    the program's own op on one (a bounded walk of its graph), or the data."""
    details["model_input"] = "nonfinite"
    feeder = upstream.feeder(model.capture, bad_inputs)
    if feeder is not None:  # born in netG's forward
        name = model.root_name(feeder) or type(feeder).__name__
        details["fed_by"] = name
        return (f"the model's input is already non-finite: it is {name}'s output, born in {name}'s forward "
                "(replay the step to name the op)")
    sharer = upstream.feeder(model.capture, bad_inputs, by_storage=True)
    if sharer is not None:
        name = model.root_name(sharer) or type(sharer).__name__
        return (f"the model's input is already non-finite: it holds the memory of {name}'s output, freed since, "
                f"which the program may have written (replay the step to tell whether {name} made it)")
    if any(search_input_graph(t, None) is not None for t in bad_inputs):
        return ("the model's input is already non-finite: the program computed it from a model's output or "
                "parameters, not the data (replay the step to name the op)")
    if any(t.grad_fn is not None for t in bad_inputs):
        return ("the model's input is already non-finite: computed in this step from a model's output or parameters "
                "(the data, that model or the ops between; replay the step to look)")
    return "the model's input is already non-finite: it came with the data (replay the step to name it)"


def nonfinite(phase: str, model: StepModel) -> tuple[str, dict[str, Any]] | None:
    """A non-finite loss (before backward; on an accelerator, read with the gradient norm before the update) or gradient (before the update), and why."""
    st = model.current
    assert st is not None
    seen = st.losses[-1:] if phase == "before_backward" else st.losses if phase == "before_optimizer_step" else ()
    bad = next((i for i, v in enumerate(seen) if not math.isfinite(v)), None)
    if bad is not None:
        loss, details = seen[bad], dict[str, Any]()
        aligned = phase == "before_optimizer_step" and len(st.loss_captures) == len(seen)  # (all were deferred)
        forward = micro_batches.focus(model, st.loss_captures, bad) if aligned else None
        if forward is not None:
            details["forward"] = forward
        named = model.named(model.params_of_step(), grads=False)
        bad_params = tensors.nonfinite_names(named)
        out = tensors.first_tensor(model.output())
        if bad_params:
            details["nonfinite_params"] = bad_params
            n = len(bad_params)  # (nonfinite_names stops at 10)
            more = "" if n <= 3 else f" and {n - 3} more" if n < 10 else " and more"
            how = param_writes.written_between([t for n, t in named if n in bad_params], model.history,
                                               list(model.optimizers), st.index)
            why = f"parameters {', '.join(bad_params[:3])}{more} are non-finite ({how or 'the previous update made them so'})"
        elif (out is not None and not bool(torch.isfinite(out.detach()).all())) or st.output_finite is False:
            details["model_output"] = "nonfinite"
            why = "the model output is already non-finite: it was born in the forward"
            bad_inputs = _nonfinite_inputs(model)
            if bad_inputs:  # `x = x * nan` before `model(x)`: the data, not the model
                why = _input_words(model, bad_inputs, details)
        elif out is None and st.output_finite is None:
            details["model_output"] = "released"
            why = "the model output was released in the backward (replay the step to see where it was born)"
        else:
            details["model_output"] = "finite"
            why = "the model output is finite: it was born in the loss computation"
        where = f" in micro-batch {forward}" if forward is not None else ""
        rank_origin.publish(st.index)  # (many ranks: the others' gradients take it in through the all-reduce)
        return f"loss is {_fmt_nonfinite(loss)}{where}; {why}", details
    if phase == "before_optimizer_step" and st.grad_norm is not None and not math.isfinite(st.grad_norm):
        bad = tensors.nonfinite_names(model.named(model.params_of_step(), grads=True))
        if not bad:
            return None  # a finite gradient whose norm overflowed is not a NaN
        forward = backward_capture.focus(model)  # (armed, several backwards: the one that made them, replayed)
        own_finite = all(math.isfinite(v) for v in st.losses)
        other = rank_origin.born_on(st.index, wait=0.5) if own_finite and rank_origin.world() else None
        return (
            f"gradient norm is {_fmt_nonfinite(st.grad_norm)}: non-finite gradients in {', '.join(bad[:3])}"
            + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
            + (f", from the backward of micro-batch {forward}" if forward else "")
            + (f"; this rank's loss is finite: they came in through the all-reduce from rank {other}, whose own "
               "loss was not" if other is not None else ""),
            {"nonfinite_grads": bad, **({"forward": forward} if forward else {}),
             **({"from_rank": other} if other is not None else {})},
        )
    return None


def stale_grad(model: StepModel) -> str | None:
    """The previous step's gradients still in .grad at this step's first backward."""
    st = model.current
    assert st is not None
    if st.index == 0 or st.backward_calls != 1 or st.zero_grad_called or not model.optimizers:
        return None
    grads = [p.grad for p in model.params_of_step() if p.grad is not None]
    if not grads:
        return None
    norm = tensors.total_norm(grads)
    if norm is None or float(norm) == 0.0:
        return None
    return (f"the gradients of step {st.index - 1} are still in .grad at this step's backward (norm {float(norm):.4g}): "
            "optimizer.zero_grad() was not called, so gradients accumulate across steps")


def _fmt_nonfinite(v: float) -> str:
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def _loss_median(model: StepModel) -> float | None:
    losses = [h["loss"] for h in list(model.history)[-SPIKE_WINDOW:] if h["loss"] is not None]
    return statistics.median(losses) if len(losses) >= SPIKE_MIN_STEPS else None


# How each step scalar is read (model, its current step or None): a condition reads only its own.
_SCALARS: dict[str, Callable[[StepModel, Any], Any]] = {
    "loss": lambda m, st: st.losses[-1] if st and st.losses else None,
    "loss_median": lambda m, st: _loss_median(m),
    "grad_norm": lambda m, st: st.grad_norm if st else None,
    "lr": lambda m, st: next(iter(m.lrs()), None),
    "data_wait": lambda m, st: st.data_wait if st else None,
    "step_time": lambda m, st: m.history[-1]["step_time"] if m.history else None,  # of the previous step
    "mem": lambda m, st: memory_in_use(),
}


def step_scalars(model: StepModel, names: Iterable[str] | None = None) -> dict[str, Any]:
    """The step's scalars, as conditions and reports see them; only `names` when given (the hot path asks for what its conditions read, nothing more)."""
    st = model.current
    out: dict[str, Any] = {"step": model.step}
    for name in cond_mod.SCALAR_PHASE if names is None else names:
        read = _SCALARS.get(name)
        if read is not None:
            out[name] = read(model, st)
    return out


def break_scalars(model: StepModel) -> dict[str, Any]:
    """The scalars a break reports; the gradient norm once the step's backward has run, over the parameters the step's record reads it of (after_backward said grad_norm - beside |g|)."""
    scalars = step_scalars(model, ("loss", "grad_norm", "data_wait"))
    st = model.current
    if scalars["grad_norm"] is None and st is not None and st.backward_calls and not st.optimizer_stepped:
        norm = st.clip_norm if st.clip_norm is not None else tensors.total_norm(
            [g for p in model.params_of_step() if (g := p.grad) is not None])
        scalars["grad_norm"] = tensors.as_float(norm)
    return {k: scalars[k] for k in ("loss", "grad_norm", "data_wait")} | {"lr": model.lrs()}


def _nonfinite_inputs(model: StepModel) -> list[torch.Tensor]:
    """The inputs of the step's model call that hold a non-finite value (read at a break, where a read costs nothing more)."""
    cap = model.capture
    return [t for t in tensors.tensors_in((cap.get("args"), cap.get("kwargs") or {}))
            if t.is_floating_point() and not tensors.all_finite(t)]
