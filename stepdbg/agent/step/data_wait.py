"""Data wait: the host time a step spent getting its data, wherever that happens.

- With a DataLoader: the time in its iterator's ``__next__`` for this step's batches, plus
  the time in ``DataLoader.__iter__`` (starting workers, the sampler), charged to the
  epoch's first step. Batches fetched under ``no_grad`` (evaluation) are not counted.
- In a ``get_batch()`` loop: the host time outside forward, backward and the optimizer:
  the gap since the previous step ended, and the gaps between a forward and its backward
  in the previous step (nanoGPT fetches the next batch there, so that batch's time is
  this step's). Evaluation (``no_grad`` forwards, what came before them between steps,
  and what comes after the last of them before the next step: the checkpoint nanoGPT
  saves after ``estimate_loss()``, the logs) and time paused in stepdbg are left out.

The value is known when the step's first forward starts, where ``data_wait>S`` is checked.

On CUDA a get_batch() gap may be the host waiting for the GPU (a ``loss.item()`` after
the optimizer step), which is not data time. Two events bracket the gap on the stream;
the GPU's time between them (idle, or running the batch's own kernels) is the step's
``gpu_data_wait``, read without a sync once the GPU has passed the second event, and the
doctor's data rule uses it where it is known.

Under the doctor, ``cpu_clock`` (the thread's time waiting for a CPU) is read where a
forward ends and its backward starts too: the part of the prefetch gaps that a busy
machine took (``preempted_in_step``) is no data wait, as the between-steps gap's is not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from stepdbg.agent.measure.memory import cuda_in_use


class DataWait:
    """The clock of one training thread's data wait."""

    def __init__(self) -> None:
        self._gap_start: float | None = None  # when the last step (or an evaluation) ended
        self._carried = 0.0  # forward-to-backward gaps of the previous step (prefetch)
        self._this_step = 0.0  # forward-to-backward gaps of this step so far
        self._forward_done: float | None = None
        self._iter_time = 0.0  # DataLoader.__iter__ time waiting for the next batch
        self._ended = 0.0  # an exhausted iterator's last __next__ (its workers shut down) since the last step
        self._gap_event: Any = None  # CUDA: recorded where the last step ended
        self._this_gap: tuple[Any, Any] | None = None  # CUDA: (start, end) events of this step's gap
        self._pending: list[tuple[dict[str, Any], Any, Any]] = []  # (history record, start, end) to read
        self._after_eval = False  # an evaluation ended since the last step: the gap is its, not data
        self.cpu_clock: Callable[[], float] | None = None  # set by the doctor: waited_for_cpu()
        self._forward_cpu = 0.0  # cpu_clock() where the last forward ended
        self._this_step_cpu = 0.0  # time waiting for a CPU in this step's forward-to-backward gaps

    def iter_started(self, seconds: float) -> None:
        self._iter_time += seconds

    def iter_ended(self, seconds: float) -> None:
        """An epoch's iterator is exhausted: its last __next__ took `seconds` (8 workers shut
        down: 0.2-0.3 s). That is no step's data: accelerate fetches a batch ahead, so it
        came before the epoch's last step, which was said to wait for data (and a
        data_wait>X break then stayed true into the next epoch's start-up, a repeat)."""
        self._ended += seconds

    def loader_wait(self, seconds: float) -> float:
        """A DataLoader batch came after `seconds`: with any pending __iter__ time."""
        total, self._iter_time = seconds + self._iter_time, 0.0
        return total

    def first_forward(self, used_loader: bool, loader_wait: float) -> float | None:
        """The data wait of a step whose first forward starts now."""
        ended, self._ended = self._ended, 0.0
        if used_loader:
            return loader_wait
        if self._gap_start is None:
            return None  # the first step: nothing to measure from
        if self._gap_event is not None:
            self._this_gap, self._gap_event = (self._gap_event, _event()), None
        gap = 0.0 if self._after_eval else max(0.0, time.perf_counter() - self._gap_start - ended)
        self._after_eval = False
        return gap + self._carried

    def fetched_in_step(self) -> float:
        """Seconds of the step so far between a forward and its backward: the next step's
        batch (nanoGPT's prefetch), inside this step's time but not its compute."""
        return self._this_step

    def preempted_in_step(self) -> float:
        """Of fetched_in_step(), the time the thread waited for a CPU (0.0 without cpu_clock)."""
        return self._this_step_cpu

    def forward_done(self) -> None:
        self._forward_done = time.perf_counter()
        if self.cpu_clock is not None:
            self._forward_cpu = self.cpu_clock()

    def backward_started(self) -> None:
        if self._forward_done is not None:
            self._this_step += max(0.0, time.perf_counter() - self._forward_done)
            self._forward_done = None
            if self.cpu_clock is not None:
                self._this_step_cpu += max(0.0, self.cpu_clock() - self._forward_cpu)

    def evaluation_done(self) -> None:
        """A no_grad forward ended between steps: what came before it was evaluation, and
        what comes after it until the next step is the evaluation's too."""
        self._gap_start = time.perf_counter()
        self._forward_done = None
        self._after_eval = True

    def paused(self, seconds: float) -> None:
        """Time stepdbg held the loop is nobody's data wait."""
        if self._gap_start is not None:
            self._gap_start += seconds
        if self._forward_done is not None:
            self._forward_done += seconds

    def step_ended(self, now: float, record: dict[str, Any] | None = None) -> None:
        self._gap_start = now
        self._carried, self._this_step, self._this_step_cpu = self._this_step, 0.0, 0.0
        self._forward_done = None
        if record is not None and self._this_gap is not None:
            self._pending.append((record, *self._this_gap))  # this step's gap, measured on the GPU
        self._this_gap = None
        if self._pending:
            self._read_gpu_waits()
        self._gap_event = _event() if cuda_in_use() else None

    def _read_gpu_waits(self) -> None:
        """Fill in the GPU data waits whose events the GPU has passed (no sync)."""
        while self._pending and self._pending[0][2].query():
            record, start, end = self._pending.pop(0)
            try:
                record["gpu_data_wait"] = start.elapsed_time(end) / 1e3
            except RuntimeError:  # recorded on different streams: the host's value stands
                pass
        del self._pending[:-8]  # never more than a few steps behind


def _event() -> Any:
    """A timing event on the current CUDA stream, where CUDA is in use; else None."""
    if not cuda_in_use():
        return None
    e = torch.cuda.Event(enable_timing=True)
    e.record()
    return e
