"""Patches on the objects around a step: optimizers and schedulers are noticed when made or
stepped, GradScaler's scaled loss is mapped back to the real one (an inf in *scaled*
gradients is AMP at work, not a NaN), and a distributed job's process group start is
told to the listener. Each patch is a removable handle in the step model's HookSet."""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.optim import lr_scheduler

from .hooks import HookSet


def patch_trainer_objects(model: Any, h: HookSet) -> None:
    """Install the patches for `model` (the StepModel: its optimizers, schedulers, scaled
    losses and listener)."""
    def wrap_opt_init(orig: Callable[..., Any]) -> Callable[..., Any]:
        def __init__(opt: Any, *args: Any, **kwargs: Any) -> None:
            orig(opt, *args, **kwargs)
            model.optimizers.add(opt)

        return __init__

    h.patch(torch.optim.Optimizer, "__init__", wrap_opt_init)

    def wrap_sched_step(orig: Callable[..., Any]) -> Callable[..., Any]:
        def step(sched: Any, *args: Any, **kwargs: Any) -> Any:
            model.schedulers.add(sched)
            return orig(sched, *args, **kwargs)

        return step

    h.patch(lr_scheduler.LRScheduler, "step", wrap_sched_step)

    def wrap_scale(orig: Callable[..., Any]) -> Callable[..., Any]:
        def scale(scaler: Any, outputs: Any) -> Any:
            scaled = orig(scaler, outputs)
            model.scalers.add(scaler)
            if isinstance(scaled, torch.Tensor) and isinstance(outputs, torch.Tensor):
                model.scaled = {id(scaled): outputs}
            return scaled

        return scale

    def wrap_scaler_step(orig: Callable[..., Any]) -> Callable[..., Any]:
        def step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            if not model.tracking() or model.in_scaler_step:
                return orig(scaler, optimizer, *args, **kwargs)
            model.in_scaler_step = True
            try:
                result = orig(scaler, optimizer, *args, **kwargs)
            finally:
                model.in_scaler_step = False
            model.guard("scaler", model.on_scaler_step_done, optimizer)
            return result

        return step

    def wrap_init_pg(orig: Callable[..., Any]) -> Callable[..., Any]:
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            model.listener.on_process_group(kwargs.get("timeout"), False)
            result = orig(*args, **kwargs)
            model.listener.on_process_group(kwargs.get("timeout"), True)
            return result

        return init_process_group

    if torch.distributed.is_available():
        h.patch(torch.distributed, "init_process_group", wrap_init_pg)
    h.patch(torch.amp.GradScaler, "scale", wrap_scale)
    h.patch(torch.amp.GradScaler, "step", wrap_scaler_step)


def find_existing_optimizers(model: Any) -> None:
    """Optimizers built before the hooks were installed (``watch()`` in a script):
    without knowing them, a second micro-batch would look like a manual-SGD step."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # isinstance on deprecated module proxies warns
        for obj in gc.get_objects():
            if isinstance(obj, torch.optim.Optimizer):
                model.optimizers.add(obj)
