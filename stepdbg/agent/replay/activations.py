"""The activation watch (condition `activations`): a forward whose output is not finite,
and the module that made it.

In steady state it costs one reduction of the model's output per training forward, read
once (a finite sum settles it: tensors.all_finite), and no hook on any module. Only when
the output is not finite does the root's forward run again from the step's start (its
inputs, RNG state and buffers, on copies of the buffers, under its kernel choice:
run_root), with grad on, with a forward hook on every module for that run alone. The
producer is the first module, in the order the forwards finished, with a non-finite output
from finite inputs: a child finishes before its parent, the encoder before the decoder.

A non-finite value that a later op hides (a clamp, a `where`) never reaches the output: it
is left to the gradient checks (`nan`) and the replay. Evaluation forwards (no_grad) are
not watched.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from stepdbg.agent.measure.tensors import all_finite, floating, output_sum, sharded_across_ranks
from stepdbg.agent.replay.rerun import eager_root, preserved_state, restore_step_start, run_root
from stepdbg.agent.step import host_reads, micro_batches
from stepdbg.agent.step.step_model import StepModel


def output_finite(output: Any) -> bool:
    """The steady-state check: every floating tensor of the output is finite."""
    if isinstance(output, torch.Tensor):  # the common case, without walking a structure
        return all_finite(output)
    return all(all_finite(t) for t in floating(output))


def output_nonfinite(model: StepModel, phase: str) -> bool:
    """The steady-state check, at `phase`. After the forward: the output's sum, read at once
    on the CPU; on an accelerator it stays on the device (summed over the step's forwards)
    and is read with the step's one host read (host_reads.py), then told before the
    update, where the parameters are still the step's. A sum that overflowed from finite
    values is checked element by element."""
    st, output = model.current, model.output()
    if st is None:
        return False
    if phase == "after_forward" and isinstance(output, torch.Tensor) and output.is_cpu and not model.defer_reads:
        return not all_finite(output)  # the common case on the CPU: one sum, read at once
    if phase != "after_forward":  # (the output may be gone by now: the sum says)
        if st.output_finite is not False:
            return False
        earlier = st.bad_forward is not None and st.bad_forward < len(st.output_captures) - 1
        return earlier or output is None or not output_finite(output)
    total = output_sum(output)
    if total is None:
        return False
    if host_reads.defers(total, model.defer_reads):
        st.pending_outputs.append(total)
        st.output_captures.append(micro_batches.inputs_now(model))
        return False
    return not math.isfinite(total.item()) and not output_finite(output)


def bad_micro_batch(model: StepModel) -> str | None:
    """Gradient accumulation, the sums read before the update: which forward of the step
    made the non-finite output ("1 of 3"), None for a step of one forward. An earlier one's
    inputs become the captured step's, so the search, the replay and the views run it."""
    st = model.current
    return micro_batches.focus(model, st.output_captures, st.bad_forward) if st is not None else None


class Producer:
    """A forward hook for the re-run: the first module with a non-finite output from finite inputs."""

    def __init__(self) -> None:
        self.module: torch.nn.Module | None = None
        self.inputs_bad = False  # the root's own inputs were not finite: nothing inside made it
        self.not_run: str | None = None  # why the forward was not run again (a sharded model)

    def __call__(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if self.module is not None or output_finite(output):
            return
        if all(all_finite(a) for a in floating(args, limit=64)):
            self.module = module


def find_producer(model: StepModel) -> Producer:
    """Run the captured step's forward again, hooked, and return what it found. The job's
    parameters, buffers, RNG and modes are as they were."""
    from torch.nn.modules import module as nn_module

    cap, root, found = model.capture, eager_root(model), Producer()
    if root is None or cap.get("args") is None:
        return found
    if not all(all_finite(a) for a in floating((cap["args"], cap.get("kwargs", {})), limit=64)):
        found.inputs_bad = True
        return found
    found.not_run = sharded_across_ranks(root)
    if found.not_run is not None:
        return found
    handle = nn_module.register_module_forward_hook(found)
    try:
        with preserved_state(model), torch.enable_grad():
            restore_step_start(cap)
            run_root(root, cap)
    finally:
        handle.remove()
    return found
