"""What the step model keeps about the step in progress, and what it tells its listener."""

from __future__ import annotations

from typing import Any, Protocol

import torch


class StepState:
    """What is known about the step in progress. One is made every step: the class holds
    the defaults, and the instance only what this step set (a dataclass's __init__ would
    set all twenty fields each time)."""

    phase: str = "start"
    loader_wait: float = 0.0
    loader_calls: int = 0
    data_wait: float | None = None
    batch_shape: list[int] | None = None  # the first tensor of the model's first call
    output_finite: bool | None = None  # the outputs' sums, read: None until read
    bad_forward: int | None = None  # which forward's sum was not (gradient accumulation: a micro-batch)
    outputs_read: int = 0  # the forwards' sums read so far (a break reads what is pending)
    activations_told: bool = False  # the activation watch broke (or not) on the sums read
    grad_norm: float | None = None
    clip_norm: torch.Tensor | float | None = None  # what clip_grad_norm_ returned, read with the losses
    clipping: bool = False  # the gradients were clipped (to a finite norm, or by value)
    update_refused: bool = False  # clip_grad_norm_(error_if_nonfinite=True) raised: this step updates nothing
    backward_calls: int = 0
    finite_through: int = 0  # armed: the last backward after which the gradients were read finite
    bad_backward: int | None = None  # armed: the backward after which they were first read non-finite
    bad_capture: dict[str, Any] | None = None  # its micro-batch's capture, when it is known to be that one
    unread: dict[str, Any] | None = None  # armed: the capture of a backward not read yet (backward_capture.py)
    forwards: int = 0
    zero_grad_called: bool = False
    skip: bool = False
    skipped_by_scaler: bool = False
    optimizer_stepped: bool = False

    def __init__(self, index: int, started: float) -> None:
        self.index = index
        self.started = started
        self.losses: list[float] = []
        self.pending_losses: list[torch.Tensor] = []  # on the device until the step's one read
        self.pending_outputs: list[torch.Tensor] = []  # each forward's output sum, read with the losses
        self.output_captures: list[dict[str, Any]] = []  # each forward's inputs (micro_batches.py)
        self.loss_captures: list[dict[str, Any]] = []  # each deferred loss's micro-batch inputs
        self.phase_times: dict[str, float] = {}

    def __repr__(self) -> str:
        return f"StepState({vars(self)})"


def begun(st: StepState | None) -> StepState | None:
    """The step in progress (the step model's `current`), once it has reached a pause point
    (its forward, say). A state made by a call after the last update and before the next
    forward (the loop's `opt.zero_grad()` after `opt.step()`, the loader's next fetch) is
    no step begun: the job is between steps (at its end it ran `steps` steps, not one more)."""
    return st if st is not None and st.phase != "start" else None


class StepListener(Protocol):
    """What the step model tells, on the training thread (the Session implements it)."""

    def pause_point(self, phase: str) -> None: ...
    def needs_grad_norm(self) -> bool: ...
    def reads_loss_at_backward(self) -> bool: ...
    def limits_on_device(self) -> list[float] | None: ...
    def on_batch(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None: ...
    def on_nograd_forward(self, module: torch.nn.Module) -> None: ...
    def on_loss(self, loss: torch.Tensor | None) -> None: ...
    def before_update(self, opt: torch.optim.Optimizer) -> None: ...
    def update_starts(self, opt: torch.optim.Optimizer) -> None: ...
    def after_update(self, opt: torch.optim.Optimizer) -> None: ...
    def on_step_end(self, record: dict[str, Any]) -> None: ...
    def on_process_group(self, timeout: Any, ready: bool) -> None: ...
