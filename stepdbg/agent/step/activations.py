"""The activation watch (condition `activations`): which module's forward made a
non-finite output from finite inputs.

A forward hook on every module records a finite flag per output. On an accelerator the
flags stay on the device (no sync per module) and are read once, when the root forward
ends; on the CPU reading one at once is cheaper than keeping it, and the inputs are looked
at only when it fails. Evaluation forwards (no_grad) are not watched.
"""

from __future__ import annotations

from typing import Any

import torch

from stepdbg.agent.measure.tensors import first_tensor


class ActivationWatch:
    """The flags of the forward in progress, innermost module first."""

    def __init__(self) -> None:
        self._records: list[tuple[torch.nn.Module, torch.Tensor, torch.Tensor | None]] = []

    @property
    def pending(self) -> bool:
        return bool(self._records)

    def on_output(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        out = first_tensor(output)
        if out is None or not out.is_floating_point() or not torch.is_grad_enabled():
            return
        inputs = [a.detach() for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
        with torch.no_grad():
            if out.device.type != "cpu":
                ins = torch.stack([torch.isfinite(a).all() for a in inputs]).all() if inputs else None
                self._records.append((module, torch.isfinite(out.detach()).all(), ins))
                return
            if bool(torch.isfinite(out.detach()).all()) or any(not bool(torch.isfinite(a).all()) for a in inputs):
                return  # finite, or passed on rather than produced here
        self._records.append((module, torch.zeros((), dtype=torch.bool), None))

    def producer(self) -> torch.nn.Module | None:
        """The first module whose output was non-finite from finite inputs; the records go."""
        recs, self._records = self._records, []
        if not recs:
            return None
        with torch.no_grad():
            outs = torch.stack([o.to(recs[0][1].device) for _, o, _ in recs])
            if bool(outs.all()):  # the one host read of the forward
                return None
            flags = outs.tolist()
        for (module, _, ins), out_ok in zip(recs, flags, strict=True):
            if not out_ok and (ins is None or bool(ins)):
                return module
        return None
