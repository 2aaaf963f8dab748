"""The step's host reads: what the watch copies from the device to decide, and when.

On the CPU a read costs nothing, and the loss is read before backward, where a NaN loss
breaks. On an accelerator each read is a host-device sync that exposes the launch
pipeline on a short step: the loss stays on the device until the gradient norm is read
before the update, and both come back in one copy (one sync a step). A condition that
reads the loss before backward (loss>X, loss_spike, an expression) keeps the early read.
"""

from __future__ import annotations

import math

import torch

from stepdbg.agent.measure import tensors
from stepdbg.agent.step.step_state import StepState


def defers(value: torch.Tensor, forced: bool | None) -> bool:
    """Whether `value` (a loss, the output's sum) may stay on the device until the step's
    one read (`forced`: the StepModel's defer_reads; None picks by device), unless a
    condition reads it early."""
    return not value.is_cpu if forced is None else forced


def read_pending(st: StepState, norm: torch.Tensor | float | None = None) -> float | None:
    """The step's one host read: the losses kept on the device, the forwards' output sums
    (the activation watch) and `norm` (a tensor or a number), copied together into
    st.losses, st.output_finite and st.bad_forward; `norm` as a float."""
    values = on_device(st, norm)
    if values is None:
        return tensors.as_float(norm)  # on the CPU, or nothing deferred: the one read is the norm's
    losses, outputs = len(st.pending_losses), len(st.pending_outputs)
    st.pending_losses, st.pending_outputs = [], []
    got = taken(st, values.tolist(), losses, outputs)
    return got if isinstance(norm, torch.Tensor) else tensors.as_float(norm)


def on_device(st: StepState, norm: torch.Tensor | float | None) -> torch.Tensor | None:
    """What the step's one read copies, as one tensor on the device: the losses kept there,
    the forwards' output sums, then `norm` if it is a tensor. None: nothing was kept."""
    if not st.pending_losses and not st.pending_outputs:
        return None
    vals = [_whole(v) for v in (*st.pending_losses, *st.pending_outputs,
                                *([norm] if isinstance(norm, torch.Tensor) else []))]
    dev = vals[0].device
    # One stack in the widest of their dtypes (stack promotes: a bf16 loss and a float32 norm
    # go as float32, whose every value a host float holds exactly; a double loss stays
    # double), not a conversion each: on a short GPU step every launch shows.
    together = torch.stack([v.reshape(()) if v.device == dev else v.reshape(()).to(dev) for v in vals])
    if together.is_complex():
        together = together.real
    if not together.is_floating_point() or (dev.type == "mps" and together.dtype == torch.float64):
        together = together.to(torch.float32 if dev.type == "mps" else torch.float64)
    elif together.dtype in (torch.float16, torch.bfloat16, *_FLOAT8):  # (all half: --skip-on-device
        together = together.float()  # compares the norm with a limit on the device, 1000.5 not 1000)
    return together


def taken(st: StepState, got: list[float], losses: int, outputs: int) -> float | None:
    """The host values of on_device() (`losses` losses, `outputs` output sums, then the
    norm if there was one) into st.losses, st.output_finite and st.bad_forward; the norm."""
    st.losses.extend(got[:losses])
    if outputs:  # (a break may have read the step's first forwards already: the first bad one stands)
        finite = [math.isfinite(v) for v in got[losses:losses + outputs]]
        if st.output_finite is not False:
            st.output_finite = all(finite)
            st.bad_forward = None if st.output_finite else st.outputs_read + finite.index(False)
        st.outputs_read += outputs
    rest = got[losses + outputs:]
    return rest[0] if rest else None


_FLOAT8 = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n))


def _whole(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's whole value (FSDP2's gradient norm is a partial sum on each rank: the
    all-reduce that reading it always took, now before it is stacked with plain tensors)."""
    return t.full_tensor() if tensors.is_dtensor(t) else t
