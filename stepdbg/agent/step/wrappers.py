"""Patches on the calls around a step: backward, the DataLoader, clipping and zero_grad mark
the step's phases; optimizers and schedulers are noticed when made or stepped, GradScaler's scaled loss is mapped back to the real one (an inf in *scaled*
gradients is AMP at work, not a NaN), and a distributed job's process group start is
told to the listener and its collectives counted (collectives.py). Each patch is a removable handle in the step model's HookSet."""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.optim import lr_scheduler
from torch.utils.data import dataloader

from stepdbg.agent.measure.warning_filters import silenced
from stepdbg.agent.step.collectives import patch_collectives
from stepdbg.agent.step.hooks import HookSet


def patch_step_calls(model: Any, h: HookSet) -> None:  # noqa: C901, PLR0915 - one nested wrapper per call it watches (backward, DataLoader, clip, zero_grad); they share the model and the patch set
    """Install the wrappers that mark a step's phases for `model` (the StepModel):
    ``torch.autograd.backward``, the DataLoader's ``__iter__``, its iterator's ``__next__``
    and ``_next_index`` (which sample indices a batch holds), ``clip_grad_norm_`` (the
    pre-clip norm) and ``zero_grad``."""

    def wrap_backward(orig: Callable[..., Any]) -> Callable[..., Any]:
        def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            outer = model._bwd_depth == 0 and model.tracking()
            model._bwd_depth += 1
            try:
                if outer:
                    model.guard("backward", model.on_backward_pre, tensors)
                result = orig(tensors, *args, **kwargs)
            finally:
                model._bwd_depth -= 1
            if outer:
                model.guard("backward", model._on_backward_post)
            return result

        return backward

    h.patch(torch.autograd, "backward", wrap_backward)

    def wrap_next(orig: Callable[..., Any]) -> Callable[..., Any]:
        def __next__(it: Any) -> Any:
            t0 = time.perf_counter()
            if model.overfit and model._overfit_batch is not None:
                batch = model._overfit_batch  # the same batch again: overfit one batch
            else:
                try:
                    batch = orig(it)
                except StopIteration:  # (the epoch's end: its workers shut down in this call)
                    if torch.is_grad_enabled() and model.tracking():
                        model.guard("dataloader", model.data.iter_ended, time.perf_counter() - t0)
                    raise
                if model.overfit:
                    model._overfit_batch = batch
            if torch.is_grad_enabled() and model.tracking():  # an evaluation's batches are not the step's
                model.guard("dataloader", model._on_loader_next, it, batch, time.perf_counter() - t0)
            return batch

        return __next__

    def wrap_iter(orig: Callable[..., Any]) -> Callable[..., Any]:
        def __iter__(loader: Any) -> Any:
            t0 = time.perf_counter()
            it = orig(loader)
            if torch.is_grad_enabled() and model.tracking():  # worker start-up: the epoch's first step
                model.guard("dataloader", model._on_loader_iter, it, time.perf_counter() - t0)
            return it

        return __iter__

    def wrap_next_index(orig: Callable[..., Any]) -> Callable[..., Any]:
        # The sampler's indices, in the order their batches come back (workers prefetch
        # ahead; batches arrive in order unless in_order=False): the replay names the
        # dataset index of a bad sample with them.
        def _next_index(it: Any) -> Any:
            index = orig(it)
            model.guard("dataloader", model._on_index, it, index)
            return index

        return _next_index

    h.patch(dataloader._BaseDataLoaderIter, "__next__", wrap_next)
    h.patch(dataloader.DataLoader, "__iter__", wrap_iter)
    h.patch(dataloader._BaseDataLoaderIter, "_next_index", wrap_next_index)

    def clipping(limit: Any) -> None:  # (an infinite max_norm only reads the norm: no clipping)
        try:
            finite = limit is None or math.isfinite(float(limit))  # (a tensor, numpy's float32, "inf")
        except (TypeError, ValueError, RuntimeError):
            finite = True
        if finite:
            (model.current or model.ensure_step()).clipping = True

    def wrap_clip(orig: Callable[..., Any]) -> Callable[..., Any]:
        def clip_grad_norm_(*args: Any, **kwargs: Any) -> Any:
            try:
                norm = orig(*args, **kwargs)
            except RuntimeError as e:  # error_if_nonfinite=True: the break before the program stops
                if "non-finite" in str(e):
                    model.act("clip", model.optimizer_phase.clip_refused)
                raise
            model.act("clip", model._on_clip, norm)
            model.act("clip", clipping, args[1] if len(args) > 1 else kwargs.get("max_norm"))
            return norm

        return clip_grad_norm_

    def wrap_clip_other(orig: Callable[..., Any]) -> Callable[..., Any]:
        def clip(*args: Any, **kwargs: Any) -> Any:  # clip_grad_value_, clip_grads_with_norm_ (torch 2.6)
            out = orig(*args, **kwargs)
            model.act("clip", clipping, args[1] if len(args) > 1 else kwargs.get("max_norm", kwargs.get("clip_value")))
            return out

        return clip

    for owner in (torch.nn.utils, torch.nn.utils.clip_grad):
        h.patch(owner, "clip_grad_norm_", wrap_clip)
        for other in ("clip_grad_value_", "clip_grads_with_norm_"):
            if hasattr(owner, other):
                h.patch(owner, other, wrap_clip_other)

    def wrap_zero_grad(orig: Callable[..., Any]) -> Callable[..., Any]:
        def zero_grad(obj: Any, *args: Any, **kwargs: Any) -> Any:
            model.act("zero_grad", model._on_zero_grad, obj)
            return orig(obj, *args, **kwargs)

        return zero_grad

    h.patch(torch.optim.Optimizer, "zero_grad", wrap_zero_grad)
    h.patch(torch.nn.Module, "zero_grad", wrap_zero_grad)


def patch_trainer_objects(model: Any, h: HookSet) -> None:  # noqa: C901 - one branch per framework object it recognises (Lightning, HF Trainer, GradScaler)
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
        patch_collectives(model.collectives, h)
    h.patch(torch.amp.GradScaler, "scale", wrap_scale)
    h.patch(torch.amp.GradScaler, "step", wrap_scaler_step)


def find_existing_optimizers(model: Any) -> None:
    """Optimizers built before the hooks were installed (``watch()`` in a script):
    without knowing them, a second micro-batch would look like a manual-SGD step."""
    with silenced():  # isinstance on deprecated module proxies warns
        for obj in gc.get_objects():
            if isinstance(obj, torch.optim.Optimizer):
                model.optimizers.add(obj)
