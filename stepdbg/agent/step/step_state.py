"""What the step model keeps about the step in progress, and what it tells its listener."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch


@dataclass(slots=True)
class StepState:
    """What is known about the step in progress."""

    index: int
    started: float
    phase: str = "start"
    loader_wait: float = 0.0
    loader_calls: int = 0
    data_wait: float | None = None
    batch_shape: list[int] | None = None  # the first tensor of the model's first call
    losses: list[float] = field(default_factory=list)
    pending_losses: list[torch.Tensor] = field(default_factory=list)  # on the device until the step's one read
    grad_norm: float | None = None
    clip_norm: torch.Tensor | float | None = None  # what clip_grad_norm_ returned, read with the losses
    backward_calls: int = 0
    forwards: int = 0
    zero_grad_called: bool = False
    phase_times: dict[str, float] = field(default_factory=dict)
    skip: bool = False
    skipped_by_scaler: bool = False
    optimizer_stepped: bool = False


class StepListener(Protocol):
    """What the step model tells, on the training thread (the Session implements it)."""

    def pause_point(self, phase: str) -> None: ...
    def needs_grad_norm(self) -> bool: ...
    def reads_loss_at_backward(self) -> bool: ...
    def on_batch(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None: ...
    def on_nograd_forward(self, module: torch.nn.Module) -> None: ...
    def on_loss(self, loss: torch.Tensor | None) -> None: ...
    def before_update(self, opt: torch.optim.Optimizer) -> None: ...
    def update_starts(self, opt: torch.optim.Optimizer) -> None: ...
    def after_update(self, opt: torch.optim.Optimizer) -> None: ...
    def on_step_end(self, record: dict[str, Any]) -> None: ...
    def on_process_group(self, timeout: Any, ready: bool) -> None: ...
