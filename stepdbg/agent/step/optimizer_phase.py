"""The optimizer's step as the step model sees it: torch's global optimizer-step hooks
(pre and post), a closure-style step (LBFGS, Lightning's automatic optimization) whose
forward and backward run inside ``step()``, and GradScaler's skipped updates. The update
phase begins where gradients are final: after the backward and the clipping."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from stepdbg.agent.step import host_reads, micro_batches
from stepdbg.agent.step.device_skip import takes_found_inf


def opt_params(opt: torch.optim.Optimizer) -> list[torch.nn.Parameter]:
    return [p for g in opt.param_groups for p in g["params"]]


class OptimizerPhase:
    """The step model's hooks around ``optimizer.step()``."""

    def __init__(self, model: Any) -> None:
        self.m = model  # the StepModel, which builds this part (so it is not imported here)

    def pre_hook(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> Any:
        """Before `opt.step(...)`. A closure-style step (LBFGS, PyTorch Lightning's automatic
        optimization) runs its forward and backward *inside* the step: then the closure is
        wrapped, and the step's update phase begins when the closure has returned (after
        the framework's clipping), not here, before its forward."""
        m = self.m
        # The hook sees step's own arguments: (optimizer, closure) or closure=...
        closure = kwargs.get("closure", args[1] if len(args) > 1 else None)
        if callable(closure):
            wrapped = m.act("optimizer", self._wrap_closure, opt, closure)
            if wrapped is not None:
                if "closure" in kwargs:
                    return args, {**kwargs, "closure": wrapped}
                return (args[0], wrapped, *args[2:]), kwargs
            return None
        m.act("optimizer", self.before_update, opt)
        return None

    def _wrap_closure(self, opt: torch.optim.Optimizer, closure: Callable[[], Any]) -> Callable[[], Any]:
        m = self.m
        m.know_optimizer(opt)
        m.ensure_step()
        m.in_optimizer_step = True  # the closure's backward is not a manual-SGD step
        first = [True]
        model, phase = m, self

        def closure_under_stepdbg(*a: Any, **kw: Any) -> Any:
            result = closure(*a, **kw)
            if first[0] and model.tracking():  # LBFGS calls it again in its line search: one update phase
                first[0] = False
                model.guard("optimizer", phase.before_update, opt)
            return result

        return closure_under_stepdbg

    def before_update(self, opt: torch.optim.Optimizer) -> None:
        """Gradients are final (this step's backward and clipping are done), the update is next."""
        m = self.m
        if m._last_optimizer() is not opt:
            m.know_optimizer(opt)
        st = m.current or m.ensure_step()
        m.in_optimizer_step = True
        norm = st.clip_norm if st.clip_norm is not None else m.grad_norm_on_device(opt_params(opt))
        if not (m.device_skip.on and self._skip_on_device(st, opt, norm)):
            st.grad_norm = host_reads.read_pending(st, norm)
        m.listener.before_update(opt)
        m.pause_point("before_optimizer_step")
        m.listener.update_starts(opt)

    def clip_refused(self) -> None:
        """clip_grad_norm_(..., error_if_nonfinite=True) is raising: the gradients' norm is
        not finite, and the program stops here. The update's checks run first, as they
        would have at the update that never comes (a break on nan, with its replay)."""
        m = self.m
        st = m.current or m.ensure_step()
        st.grad_norm = host_reads.read_pending(st, m.grad_norm_on_device(m.params_of_step()))
        m.pause_point("before_optimizer_step")
        st.update_refused = True  # (a program that goes on starts its next step with its next forward)

    def _skip_on_device(self, st: Any, opt: torch.optim.Optimizer, norm: Any) -> bool:
        """--skip-on-device (device_skip.py): the update decided on the device, where the
        optimizer takes found_inf and the conditions read nothing else before the update."""
        m = self.m
        m.device_skip.disarm()  # (a flag left by an update that raised)
        limits = m.listener.limits_on_device() if takes_found_inf(opt) and not m.in_scaler_step else None
        return limits is not None and m.device_skip.arm(st, opt, norm, limits, micro_batches.inputs_now(m))

    def post_hook(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        m = self.m
        if m.device_skip.on:
            m.device_skip.disarm()
        m.in_optimizer_step = False
        st = m.current or m.ensure_step()
        m.listener.after_update(opt)
        st.optimizer_stepped = True
        m.pause_point("after_optimizer_step")
        if not m.in_scaler_step:
            m.end_step()

    def scaler_step_done(self, opt: torch.optim.Optimizer) -> None:
        m = self.m
        st = m.ensure_step()
        if not st.optimizer_stepped:
            # The scaler found inf/nan in the scaled gradients and skipped the update:
            # that is how AMP works, not a NaN to report.
            st.skipped_by_scaler = True
            if st.pending_losses or st.pending_outputs:
                # On an accelerator the loss (and the output's sum) waited on the device for
                # the read before the update, which the scaler skipped: they are read here
                # and checked where the update would have been (a NaN loss is the data's or
                # the model's, which the skip hides, not AMP's). The norm is not read: the
                # scaled gradients' overflow is AMP's.
                host_reads.read_pending(st)
                m.pause_point("before_optimizer_step")
        m.end_step()

