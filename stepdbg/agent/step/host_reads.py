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
    outputs = st.pending_outputs
    if not st.pending_losses and not outputs:
        return tensors.as_float(norm)  # on the CPU, or nothing deferred: the one read is the norm's
    vals = [_whole(v) for v in (*st.pending_losses, *outputs, *([norm] if isinstance(norm, torch.Tensor) else []))]
    dev = vals[0].device
    dtype = torch.float32 if dev.type == "mps" else torch.float64  # a double loss stays exact
    got = torch.stack([v.reshape(()).to(dev, dtype) for v in vals]).tolist()
    n = len(st.pending_losses)
    st.losses.extend(got[:n])
    st.pending_losses.clear()
    if outputs:
        finite = [math.isfinite(v) for v in got[n:n + len(outputs)]]
        st.output_finite = all(finite)
        st.bad_forward = None if st.output_finite else finite.index(False)
        n += len(outputs)
        st.pending_outputs = []
    return got[n] if isinstance(norm, torch.Tensor) else tensors.as_float(norm)


def _whole(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's whole value (FSDP2's gradient norm is a partial sum on each rank: the
    all-reduce that reading it always took, now before it is stacked with plain tensors)."""
    return t.full_tensor() if tensors.is_dtensor(t) else t
