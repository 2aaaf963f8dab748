"""Skip on the device (``--skip-on-device``): the NaN watch with no host sync a step.

torch's fused optimizers (Adam, AdamW, SGD and Adagrad made with ``fused=True``: those that
set ``_step_supports_amp_scaling``) take ``found_inf`` the way GradScaler hands it to them:
a device tensor that, when 1, makes the update kernel leave the parameters, the optimizer's
state and its step count alone. In this mode the step's values (the losses and output sums
kept on the device, the gradient norm) are reduced on the device into that flag before the
update (not finite, or a norm above a ``grad_norm>X`` limit), and copied to the host
asynchronously (pinned memory, an event; no sync). They are read when the next step
reaches its update: a bad step was never applied, and its break is taken there, one step
late, with the parameters as they were before it. The bad step's inputs are kept, so its
replay runs it (the parameters it ran with are the ones in place).

Other optimizers, a GradScaler's step and conditions that read other values before the
update (``loss>X``, an expression) keep the step's one read (host_reads.py).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import torch

from stepdbg.agent.step import host_reads, micro_batches
from stepdbg.agent.step.step_state import StepState


def takes_found_inf(opt: torch.optim.Optimizer) -> bool:
    """`opt.step()` skips its update on the device when ``opt.found_inf`` is 1 (torch's own
    contract with GradScaler), and nobody else has set one for this step."""
    return bool(getattr(opt, "_step_supports_amp_scaling", False)) and not hasattr(opt, "found_inf")


def _many_ranks() -> bool:
    d = torch.distributed
    return d.is_available() and d.is_initialized() and d.get_world_size() > 1


class Deferred:
    """One step's values on their way to the host."""

    def __init__(self, st: StepState, host: torch.Tensor, event: Any, losses: int, outputs: int,
                 limits: list[float], norm_only: bool, inputs: dict[str, Any]) -> None:
        self.st, self.host, self.event = st, host, event
        self.losses, self.outputs, self.limits = losses, outputs, limits
        self.norm_only = norm_only  # many ranks: the flag was set from the gradient norm alone
        self.inputs = inputs  # the step's captured inputs (micro_batches.inputs_now): its replay

    def arrived(self) -> bool:
        return self.event is None or self.event.query()

    def verdict(self, history: Any) -> tuple[str, str] | None:
        """Read the values into the step's state and its record in `history`: (condition
        kind, reason) if the update was skipped, else None."""
        st, got = self.st, self.host.tolist()
        st.grad_norm = norm = host_reads.taken(st, got, self.losses, self.outputs)
        # The flag the optimizer took, by arm()'s rule on the same values (not copied: three ops fewer).
        skipped = not all(math.isfinite(v) for v in (got[-1:] if self.norm_only else got)) or \
            (norm is not None and any(norm > x for x in self.limits))
        found = self._found(norm)
        for record in reversed(history):  # (the step's record is one or two from the end)
            if record["step"] == st.index:
                record["loss"] = sum(st.losses) / len(st.losses) if st.losses else None
                record["grad_norm"], record["skipped"] = norm, record["skipped"] or skipped
                break
        if found is None:
            return None
        if skipped:
            return found[0], (f"{found[1]}; its update was skipped on the device (found_inf): the parameters "
                              "and the optimizer's state are as before it")
        return found[0], (f"{found[1]}; its update was applied (with many ranks the device decides from the "
                          "gradient norm alone, the same on every rank)")

    def focus(self, model: Any) -> str | None:
        """Put the skipped step's inputs back in the StepModel's capture, so its replay and
        the module search run it: with gradient accumulation, those of the micro-batch whose
        loss or output was not finite ("1 of 3", else None)."""
        model.capture, st = self.inputs, self.st
        bad_loss = next((i for i, v in enumerate(st.losses) if not math.isfinite(v)), None)
        return micro_batches.focus(model, st.output_captures, st.bad_forward) or (
            micro_batches.focus(model, st.loss_captures, bad_loss) if len(st.loss_captures) == len(st.losses) else None)

    def _found(self, norm: float | None) -> tuple[str, str] | None:
        st = self.st
        bad_loss = next((v for v in st.losses if not math.isfinite(v)), None)
        if bad_loss is not None:
            born = {False: "; the model output was already non-finite: it was born in the forward",
                    True: "; the model output was finite: it was born in the loss computation"}.get(st.output_finite, "")
            return "nan", f"loss is {bad_loss}{born}"
        if st.output_finite is False:
            return "nan", "the model's output is not finite"
        if norm is not None and not math.isfinite(norm):
            return "nan", f"gradient norm is {norm}"
        over = [x for x in self.limits if norm is not None and norm > x]
        return ("grad_norm", f"gradient norm {norm:.4g} > {over[0]:g}") if over else None


class DeviceSkip:
    """The steps whose update was decided on the device, until their values are read."""

    def __init__(self) -> None:
        self.on = False
        self.inflight: deque[Deferred] = deque()
        self._armed: list[torch.optim.Optimizer] = []

    def arm(self, st: StepState, opt: torch.optim.Optimizer, norm: Any, limits: list[float],
            inputs: dict[str, Any]) -> bool:
        """Before `opt`'s update: set its found_inf from the step's values on the device and
        send them to the host. False: nothing was kept on the device (read as usual)."""
        values = host_reads.on_device(st, norm)
        has_norm, many = isinstance(norm, torch.Tensor), _many_ranks()
        if values is None or (many and not has_norm):
            return False
        # With many ranks only the gradient norm decides (DDP and FSDP make it the same on
        # every rank): a loss or an output is a rank's own, and one rank skipping alone
        # would leave the replicas apart. The losses and outputs still say why, a step late.
        bad = ~torch.isfinite(values[-1:] if many else values).all()
        for limit in limits if has_norm else ():
            bad = bad | (values[-1] > limit)
        opt.found_inf = bad.to(torch.float32)  # type: ignore[attr-defined]  (read by the fused step, then deleted)
        self._armed.append(opt)
        host = torch.empty(values.shape, dtype=values.dtype, pin_memory=values.is_cuda)
        host.copy_(values, non_blocking=True)
        event = None
        if values.is_cuda:
            event = torch.cuda.Event()
            event.record()
        self.inflight.append(Deferred(st, host, event, len(st.pending_losses), len(st.pending_outputs),
                                      limits if has_norm else [], many, inputs))
        st.pending_losses, st.pending_outputs = [], []
        return True

    def disarm(self) -> None:
        """After the update: the optimizer is as the program made it (no found_inf left)."""
        for opt in self._armed:
            if hasattr(opt, "found_inf"):
                del opt.found_inf  # type: ignore[attr-defined]
        self._armed = []

    def arrived(self, before_step: int) -> list[Deferred]:
        """The values of steps before `before_step` that have reached the host, oldest first
        (never the step in progress: its break is always one step late, on any device)."""
        out = []
        while self.inflight and self.inflight[0].st.index < before_step and self.inflight[0].arrived():
            out.append(self.inflight.popleft())
        return out

    def drain(self) -> list[Deferred]:
        """Every step still in flight (the job ends): waited for."""
        for d in self.inflight:
            if d.event is not None:
                d.event.synchronize()
        out = list(self.inflight)
        self.inflight.clear()
        return out
