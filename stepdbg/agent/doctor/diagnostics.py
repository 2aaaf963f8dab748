"""Rule-based findings: small functions over what the agent measures, no guessing.

A finding is a rule id, a severity, one sentence with the measured numbers in it, and
what to try. The rules run only when a Doctor is attached to the session (`stepdbg
doctor`, or ``Session.doctor = Doctor()``); each reports at most once per run.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from stepdbg.agent.breaks.breakpoints import stale_grad
from stepdbg.agent.doctor.measurements import (
    broadcasts,
    count_kind,
    determinism_check,
    has_kind,
    layer_norms,
    name_span,
    overfit_verdict,
)
from stepdbg.agent.measure import census
from stepdbg.agent.measure.census import top_holder
from stepdbg.agent.measure.frames import user_frame
from stepdbg.agent.measure.live_tensors import LiveTensors
from stepdbg.agent.measure.preempted import StepPreemption
from stepdbg.agent.replay.advice import stabilizers
from stepdbg.agent.replay.verdict import NONFINITE_CONDITIONS
from stepdbg.agent.step.optimizer_phase import opt_params
from stepdbg.agent.step.step_model import StepModel
from stepdbg.wire.conditions import format_size

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
WARMUP_STEPS = 3  # optimizer state and allocator caches are made in the first steps: not growth
GROWTH_SAMPLES = 10
DATA_STEPS = 3  # steps with a measured data wait before the data rule speaks (doctor --steps 4 is enough)
DROPOUT_BN = (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d,
              torch.nn.AlphaDropout, torch.nn.modules.batchnorm._BatchNorm)
REGRESSION_LOSSES = ("MseLossBackward0", "L1LossBackward0", "SmoothL1LossBackward0", "HuberLossBackward0")

RULES = {
    "stale_grad": "gradients accumulate across optimizer steps (zero_grad missing)",
    "vanishing_gradients": "some layers get gradients many orders of magnitude smaller than others",
    "exploding_updates": "each update moves the weights by over half their norm while the loss does not improve",
    "lr_too_high": "the loss climbs while the gradient norm grows",
    "loss_target_mismatch": "a regression loss on class indices, or target and output shapes that broadcast",
    "input_scale": "input features on scales more than 100x apart",
    "memory_growth": "memory grows step after step (a tensor kept alive across steps)",
    "eval_mode_training": "training with the model in eval mode (dropout and batchnorm off)",
    "train_mode_eval": "evaluating under no_grad with dropout or batchnorm in train mode",
    "slow_dataloader": "the step waits for data a large part of its time",
    "nondeterministic": "the same step from the same state gives different results",
    "cannot_overfit": "the model cannot fit one repeated batch",
    "nonfinite": "the loss or the gradients went NaN or inf (a break), with what the replay of that step found",
}


@dataclass
class Finding:
    rule: str
    severity: str
    step: int
    message: str
    advice: str
    data: dict[str, Any] = field(default_factory=dict)


class Doctor:
    """Runs the rules during a session and collects findings (each rule at most once)."""

    def __init__(self, window: int = 50) -> None:
        self.window = window
        self.findings: list[Finding] = []
        self._fired: set[str] = set()
        self._before_update: dict[int, torch.Tensor] = {}
        self.layer_grads: list[dict[str, float]] = []
        self.update_ratios: list[dict[str, float]] = []
        self.tensor_bytes: list[int] = []  # tensors alive at the end of each step after the warm-up
        self._last_census: dict[str, Any] = {}
        self.live = LiveTensors()  # the census's every live tensor, without a walk of every object a step
        self.preempted = StepPreemption()  # a busy machine's share of each step's gap and work
        # Set by the session: where findings and other events go (report, clients, stderr).
        self._nan_break: dict[str, Any] | None = None  # a NaN break whose replay may still come
        self.notify: Callable[..., None] = lambda f, said=False: None  # (said: its words are on stderr already)
        self.write: Callable[..., None] = lambda event, **fields: None

    # ------------------------------------------------------------------ plumbing

    def add(self, m: StepModel, rule: str, severity: str, message: str, advice: str, said: bool = False, **data: Any) -> None:
        if rule in self._fired:  # (said: its words come on their own, not said on stderr)
            return
        self._fired.add(rule)
        f = Finding(rule, severity, data.pop("step", m.step), message, advice, data)
        self.findings.append(f)
        self.notify(f, said=said)

    def on_event(self, event: str, data: Any) -> None:
        """A bus listener: a break on a non-finite value is a finding (a run NaN from step 1
        has no finite steps for the other rules to measure), told with what the replay of
        its step found when one runs (doctor replays such breaks) or at the next hook."""
        conditions = set(data.get("conditions") or [data.get("condition")]) if event == "break" else set()
        if conditions & {*NONFINITE_CONDITIONS, "exception"}:  # (an exception a NaN caused: BCE refuses one)
            self.flush_nan_break()
            self._nan_break = data
        elif event == "replay" and self._nan_break is not None and data.get("step") == self._nan_break.get("step"):
            self.flush_nan_break(data)

    def flush_nan_break(self, replay: dict[str, Any] | None = None) -> None:
        brk, self._nan_break = self._nan_break, None
        if brk is None or "nonfinite" in self._fired:
            return
        raised = brk.get("condition") == "exception"
        if raised and not (replay or {}).get("first_nonfinite"):
            return  # an exception no non-finite value is known to have caused: the run's exit says it
        self._fired.add("nonfinite")
        where = brk.get("where") or {}
        at = f" at {os.path.basename(where['file'])}:{where['line']}" if where.get("file") else ""
        found = replay.get("summary") if replay else None
        advice = (replay or {}).get("advice") or {}
        f = Finding("nonfinite", "error", int(brk.get("step") or 0),
                    (f"the replay of step {brk.get('step')}: {found}" if found else f"{brk.get('reason')}{at}")
                    + (f"; then {brk.get('reason')}{at}" if raised else ""),
                    advice.get("text") or "replay the step to find the op that made it: stepdbg --break nan "
                                          "--on-break replay python SCRIPT (or r at a pause)",
                    {"break": {k: brk.get(k) for k in ("step", "phase", "condition", "reason")},
                     "replay": {k: replay.get(k) for k in ("summary", "verdict", "first_nonfinite")} if replay else None})
        self.findings.append(f)
        self.notify(f, said=found is not None)  # (the replay's lines say it: `replay of step 30: ...`)

    def ranked(self) -> list[Finding]:
        return sorted(self.findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.step))

    # ------------------------------------------------------------------ hooks from the session

    def on_batch(self, m: StepModel, root: torch.nn.Module, args: tuple[Any, ...]) -> None:
        self.flush_nan_break()  # a NaN break of an earlier step that no replay followed
        self.preempted.first_forward(m.step, m.data)
        if root.training is False and has_kind(root, DROPOUT_BN):
            self.add(m, "eval_mode_training", "error",
                     f"step {m.step} trains with the model in eval mode: "
                     f"{count_kind(root, DROPOUT_BN)} dropout/batchnorm modules are switched off",
                     "call model.train() before the training loop (and after every evaluation)")
        if m.step < 3:
            x = args[0] if args and isinstance(args[0], torch.Tensor) else None
            if x is not None and x.is_floating_point() and x.dim() == 2 and x.shape[1] >= 2 and x.shape[0] >= 2:
                self._input_scale(m, x)

    def on_nograd_forward(self, m: StepModel, root: torch.nn.Module) -> None:
        if root.training and has_kind(root, DROPOUT_BN):
            self.add(m, "train_mode_eval", "warning",
                     f"a forward under no_grad (evaluation) ran with the model in train mode: "
                     f"{count_kind(root, DROPOUT_BN)} dropout/batchnorm modules behave as in training",
                     "call model.eval() before evaluating and model.train() after")

    def on_loss(self, m: StepModel, loss: torch.Tensor | None) -> None:
        if loss is None or loss.grad_fn is None or m.step > 2:
            return
        node = loss.grad_fn
        for _ in range(4):  # the loss node may sit under a mean/div (accumulation scaling)
            if node is None or node.name() in REGRESSION_LOSSES or node.name().startswith("NllLoss"):
                break
            node = node.next_functions[0][0] if node.next_functions else None
        if node is None:
            return
        name = node.name()
        out = getattr(node, "_saved_self", None)
        target = getattr(node, "_saved_target", None)
        if name in REGRESSION_LOSSES and isinstance(out, torch.Tensor) and isinstance(target, torch.Tensor):
            self._regression_target(m, name.replace("Backward0", ""), out, target)

    def on_grads(self, m: StepModel, params: list[torch.nn.Parameter]) -> None:
        layers = layer_norms(m, params, grads=True)
        if layers:
            self.layer_grads.append(layers)
            self._vanishing(m, layers)
        self._before_update = {id(p): p.detach().clone() for p in params if p.grad is not None}

    def on_update(self, m: StepModel, params: list[torch.nn.Parameter]) -> None:
        if not self._before_update:
            return
        names = m.param_names()
        ratios: dict[str, float] = {}
        with torch.no_grad():
            for p in params:
                old = self._before_update.get(id(p))
                if old is None:
                    continue
                w = float(torch.linalg.vector_norm(old.float()))
                if w > 0:
                    ratios[names.get(id(p), "?")] = float(torch.linalg.vector_norm((p - old).float())) / w
        self._before_update = {}
        if not ratios:
            return
        self.update_ratios.append(ratios)
        med = statistics.median(ratios.values())
        losses = [h["loss"] for h in list(m.history)[-3:] if h["loss"] is not None]
        not_improving = len(losses) >= 2 and not (losses[-1] < losses[0])  # nan compares False too
        if (len(self.update_ratios) >= 3 and not_improving
                and all(statistics.median(r.values()) > 0.5 for r in self.update_ratios[-3:])):
            self.add(m, "exploding_updates", "error",
                     f"each update changes the weights by {med:.0%} of their norm (median over "
                     f"{len(ratios)} tensors; healthy runs are near 0.1%)",
                     "lower the learning rate 10-100x" + stabilizers(m.history))

    def before_backward(self, m: StepModel, loss: torch.Tensor | None) -> None:
        self.on_loss(m, loss)
        reason = stale_grad(m)
        if reason:
            self.add(m, "stale_grad", "error", reason, "call optimizer.zero_grad() once per optimizer step")

    def before_update(self, m: StepModel, opt: torch.optim.Optimizer) -> None:
        self.on_grads(m, opt_params(opt))
        if m.step == 1 and m.armed:
            r = determinism_check(m)
            self.write("determinism", step=m.step, **r)
            if r.get("checked") and not r["reproducible"]:
                from stepdbg.agent.diff.twice import parting_words, step_twice

                parts = step_twice(m)  # where the two runs part: the module, op, line and randomness
                where = f"; {parting_words(parts)}" if parts.get("first_divergence") else ""
                r["first_divergence"], r["randomness"] = parts.get("first_divergence"), parts.get("randomness")
                self.add(m, "nondeterministic", "warning",
                         f"replaying step {m.step} twice from the same state differs by up to "
                         f"{max(r['max_output_diff'], r['max_grad_diff']):.3g}: {r['cause']}{where}",
                         "seed every RNG the step uses (random, numpy, torch) and "
                         "torch.use_deterministic_algorithms(True)", **r)

    def overfit_result(self, m: StepModel) -> tuple[bool, str]:
        """At the end of `stepdbg overfit`: whether the loss reached near zero, in words."""
        losses = [h["loss"] for h in m.history if h["loss"] is not None]
        ok, words = overfit_verdict(losses)
        self.write("overfit", losses=losses, reached_near_zero=ok, verdict=words)
        if not ok:  # (said once, by the summary that follows at once: the overfit box)
            self.add(m, "cannot_overfit", "error", words,
                     "check for frozen layers (requires_grad), a too-low LR, the loss reduction "
                     "(sum vs mean) and that targets match the outputs", said=True,
                     step=(m.history or [{"step": m.step}])[-1]["step"])  # (the last step, not the count)
        return ok, words

    def on_step_end(self, m: StepModel) -> None:
        hist = list(m.history)
        if hist:
            self.preempted.step_ended(hist[-1]["step"], m.data)
        self._lr_too_high(m, hist)
        if m.step > WARMUP_STEPS and "memory_growth" not in self._fired:
            frame = user_frame(sys._getframe())
            self._last_census = census.of_step(m, [frame] if frame is not None else [], live=self.live)
            self.tensor_bytes.append(self._last_census["counted"])
            self._memory_growth(m)
            if "memory_growth" in self._fired:
                self.live.stop()
        self._slow_loader(m, hist)
        self.preempted.gap_starts()  # (three reads a step, under the doctor only)

    # ------------------------------------------------------------------ rules

    def _input_scale(self, m: StepModel, x: torch.Tensor) -> None:
        with torch.no_grad():
            scale = x.detach().float().abs().amax(dim=0)
        finite = [(i, float(v)) for i, v in enumerate(scale.tolist()) if math.isfinite(v) and v > 0]
        if len(finite) < 2:
            return
        lo_i, lo = min(finite, key=lambda t: t[1])
        hi_i, hi = max(finite, key=lambda t: t[1])
        if hi / lo > 100:
            self.add(m, "input_scale", "warning",
                     f"input feature {hi_i} reaches {hi:.3g} while feature {lo_i} stays within {lo:.3g}: "
                     f"{hi / lo:.0f}x apart",
                     "standardize each feature (subtract the mean, divide by the std of the training set)",
                     max_feature=hi_i, min_feature=lo_i, ratio=hi / lo)

    def _regression_target(self, m: StepModel, loss: str, out: torch.Tensor, target: torch.Tensor) -> None:
        if out.shape != target.shape:
            shape = list(torch.broadcast_shapes(out.shape, target.shape)) if broadcasts(out, target) else None
            self.add(m, "loss_target_mismatch", "error",
                     f"{loss} gets output {list(out.shape)} and target {list(target.shape)}"
                     + (f", which broadcast to {shape}: every output is compared with every target" if shape else ""),
                     "make the shapes equal (e.g. output.squeeze(-1) or target.view_as(output))")
            return
        with torch.no_grad():
            t = target.detach()
            integral = bool((t == t.round()).all()) if t.is_floating_point() else True
            uniq = torch.unique(t).numel() if integral else 0
        if integral and 2 <= uniq <= 20 and t.numel() >= 8:
            self.add(m, "loss_target_mismatch", "error",
                     f"{loss} on targets that take only {uniq} integer values: they look like class "
                     "indices, and a regression loss treats class 9 as 'far' from class 1",
                     "use cross_entropy on logits with integer class targets", unique_targets=uniq)

    def _vanishing(self, m: StepModel, layers: dict[str, float]) -> None:
        if m.step < 1 or len(layers) < 3:
            return
        hi_name, hi = max(layers.items(), key=lambda t: t[1])
        small = [n for n, v in layers.items() if v < 1e-7 and v < hi * 1e-4]
        if hi > 0 and small:
            acts = sorted({type(m).__name__ for r in m.roots.values() for m in r.modules()
                           if isinstance(m, (torch.nn.Sigmoid, torch.nn.Tanh))})
            through = f": vanishing gradients through {'/'.join(acts)} activations" if acts else ": vanishing gradients"
            self.add(m, "vanishing_gradients", "error",
                     f"{len(small)} of {len(layers)} layers ({name_span(small)}) get gradient norms under 1e-7 "
                     f"while {hi_name} gets {hi:.2g}{through}",
                     "use ReLU/GELU, residual connections or normalization, and a suited init (kaiming/xavier)",
                     layers=layers)

    def _lr_too_high(self, m: StepModel, hist: list[dict[str, Any]]) -> None:
        pts = [(h["loss"], h["grad_norm"]) for h in hist[-10:] if h["loss"] is not None and h["grad_norm"] is not None]
        if len(pts) < 4:
            return
        losses = [p[0] for p in pts]
        norms = [p[1] for p in pts]
        finite = [(lo, n) for lo, n in pts if math.isfinite(lo) and math.isfinite(n)]
        rising = len(finite) == len(pts) and losses[-1] > 10 * min(losses) and norms[-1] > 10 * norms[0]
        # A loss that goes non-finite is the learning rate's doing only when the norms were
        # already climbing before it did; a log(0) out of the blue is a domain error instead.
        blew_up = (len(finite) < len(pts) and math.isfinite(losses[0]) and len(finite) >= 3
                   and finite[-1][1] > 10 * finite[0][1])
        if rising or blew_up:
            lrs = hist[-1]["lr"]  # none where the loop updates the weights by hand (word_language_model)
            self.add(m, "lr_too_high", "error",
                     f"the loss went from {losses[0]:.3g} to {losses[-1]:.3g} and the gradient norm from "
                     f"{norms[0]:.3g} to {norms[-1]:.3g} in {len(pts)} steps "
                     + (f"at lr {lrs[0]}" if lrs else "(the loop updates the weights by hand, with no optimizer)"),
                     "lower the learning rate 10x " + ("(pin it live with 'lr X pin')" if lrs else "(the script's own)")
                     + stabilizers(hist))

    def _memory_growth(self, m: StepModel) -> None:
        """Like with like: the bytes of live tensors (each storage once, saved activations
        included) at the end of each step after the warm-up; not RSS, which the allocator
        and the OS move on their own."""
        mem = self.tensor_bytes[-20:]
        if len(mem) < GROWTH_SAMPLES:
            return
        rises = sum(b > a for a, b in zip(mem, mem[1:], strict=False))
        grow = mem[-1] - mem[0]
        if rises >= 0.75 * (len(mem) - 1) and grow > max(4e6, 0.1 * mem[0]):
            per_step = grow / (len(mem) - 1)
            held = top_holder(self._last_census)
            self.add(m, "memory_growth", "error",
                     f"live tensors grew in {rises} of the last {len(mem) - 1} steps, by {format_size(grow)} "
                     f"({format_size(per_step)} per step){held}: something keeps tensors alive across steps",
                     "look for a tensor kept across steps, e.g. 'total += loss' (use loss.item()) or "
                     "outputs appended to a list without .detach()",
                     holders=self._last_census["holders"], largest=self._last_census["largest"][:5])

    def _slow_loader(self, m: StepModel, hist: list[dict[str, Any]]) -> None:
        """The same data wait as data_wait>S: DataLoader time, or a get_batch loop's host time."""
        loader = m.capture.get("loader")
        it = loader() if loader is not None else None
        # The GPU's view where known; else the host's, less the time the step waited for a CPU
        # (preempted by other processes: the machine's load, not the loader's) in its gap and in
        # the step before's prefetch gaps (a micro-batch's loss, nanoGPT's get_batch); its work too.
        gap, work, fetch = self.preempted.gap, self.preempted.work, self.preempted.fetch
        rows = [{**h, "data_wait": h["gpu_data_wait"] if "gpu_data_wait" in h
                 else max(0.0, h["data_wait"] - gap.get(h["step"], 0.0) - fetch.get(h["step"] - 1, 0.0)),
                 "step_time": max(0.0, h["step_time"] - work.get(h["step"], 0.0)),
                 "fetch_in_step": max(0.0, (h.get("fetch_in_step") or 0.0) - fetch.get(h["step"], 0.0))}
                for h in hist[-10:] if h["data_wait"] is not None and h["step_time"]]
        if len(rows) < DATA_STEPS:
            return
        # One wait far longer than every other is a step preempted on a busy machine, not a
        # slow loader (a heavy transform every few batches shows as several long waits).
        kept = sorted(rows, key=lambda h: h["data_wait"])
        if kept[-1]["data_wait"] > 3 * kept[-2]["data_wait"]:
            kept = kept[:-1]
        waited = sum(h["data_wait"] for h in kept)
        # step_time starts after the batch came; a batch fetched inside the step (between a
        # forward and its backward, nanoGPT's prefetch) is the next step's wait, not compute.
        compute = sum(max(0.0, h["step_time"] - (h.get("fetch_in_step") or 0.0)) for h in kept)
        if waited <= 0.0:
            return
        share = waited / (waited + compute)
        wait = waited / len(kept)
        if not (share > 0.3 and wait > 0.01 and sum(h["data_wait"] > 0.01 for h in kept) >= 2):
            return
        if it is None:
            self.add(m, "slow_dataloader", "warning",
                     f"the loop spends {share:.0%} of its time getting data outside forward, backward and the "
                     f"optimizer (mean {wait * 1e3:.0f} ms per step; no DataLoader: the host time between steps)",
                     "fetch the next batch on a background thread or with a DataLoader (workers, pin_memory), "
                     "or make the batch cheaper to build")
            return
        from stepdbg.agent.measure.threads import loader_settings

        st = loader_settings(it)
        cores = st.get("affinity_cpus") or os.cpu_count()
        workers = st.get("num_workers")
        why = f"num_workers={workers} on {cores} cores"
        tip = ("fewer workers than cores; move heavy transforms offline" if workers and workers > (cores or 1)
               else "more DataLoader workers (up to the cores), pin_memory=True on CUDA, cheaper transforms")
        self.add(m, "slow_dataloader", "warning",
                 f"the loop waits for data {share:.0%} of the time (mean {wait * 1e3:.0f} ms per step; {why})",
                 tip, dataloader=st)
