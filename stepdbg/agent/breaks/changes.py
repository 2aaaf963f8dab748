"""Changes a person makes to a running job: learning rates (once or pinned), other
hyperparameters, skipping this step's update. Every change is logged through `log`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from stepdbg.agent.measure import tensors
from stepdbg.agent.step.optimizer_phase import opt_params
from stepdbg.agent.step.step_model import StepModel
from stepdbg.wire.ops import check_lr


class Changes:
    """LR pins and skips over the step model's optimizers and schedulers."""

    def __init__(self, model: StepModel, log: Callable[..., dict[str, Any]]) -> None:
        self.model = model
        self.log = log  # log(what, **fields) -> the change record
        self.pins: dict[tuple[int, int], float] = {}
        # A scheduler's base_lrs before the first LR change scaled them (id(scheduler): the list), and by what
        self.base_was: dict[int, dict[str, Any]] = {}
        self.hidden: list[tuple[torch.Tensor, torch.Tensor]] = []  # (param, grad) kept from a skipped update until restore_grads()

    def set_lr(self, lr: float, group: int | None = None, pin: bool = False) -> dict[str, Any]:
        """Set the learning rate of one param group (or all); `pin` keeps it set."""
        lr = check_lr(lr)
        opts = list(self.model.optimizers)
        if not opts:
            raise RuntimeError("no optimizer seen yet: there is no learning rate to set")
        changed, scaled = [], {}  # (scaled: each scheduler whose base this change scaled, by group)
        for opt in opts:
            for i, g in enumerate(opt.param_groups):
                if group is not None and i != group:
                    continue
                old = tensors.as_float(g["lr"])
                _set_group_lr(g, lr)
                for sched in list(self.model.schedulers):
                    if getattr(sched, "optimizer", None) is opt and hasattr(sched, "base_lrs") and old:
                        # The schedule goes on from the LR set, its shape kept: a scheduler that computes
                        # from base_lrs (LambdaLR, cosine) would put the old LR back at its next step.
                        self.base_was.setdefault(id(sched), {"base_lrs": list(sched.base_lrs)})
                        scaled.setdefault(id(sched), []).append({"group": i, "old": old, "new": lr})
                        sched.base_lrs[i] = sched.base_lrs[i] * lr / old
                dropped = not pin and self.pins.pop((id(opt), i), None) is not None
                if pin:
                    self.pins[(id(opt), i)] = lr
                changed.append({"group": i, "old": old, "new": lr, **({"unpinned": True} if dropped else {})})
        if not changed:
            raise ValueError(f"no param group {group}")
        for key, groups in scaled.items():  # one change, however many groups it scaled
            was = self.base_was[key]
            was["by"], was["changes"] = groups, was.get("changes", 0) + 1
        return self.log("lr", lr=lr, pinned=pin, groups=changed)

    def apply_pins(self, opt: torch.optim.Optimizer) -> None:
        """As a step begins and before its update: a pinned LR wins over a scheduler or the loop's own setting."""
        if not self.pins:
            return
        for i, g in enumerate(opt.param_groups):
            pinned = self.pins.get((id(opt), i))
            if pinned is not None and tensors.as_float(g["lr"]) != pinned:
                _set_group_lr(g, pinned)

    def set_param_group(self, key: str, value: float, group: int | None = None) -> dict[str, Any]:
        """Set another numeric hyperparameter (weight_decay, momentum, eps, ...) of a param
        group. Only a number that the group already holds as a number can be changed, and
        nothing is changed unless every group it names can take it."""
        if key == "lr":
            raise ValueError("use set_lr for the learning rate (it keeps schedulers and pins right)")
        if key == "params":
            raise ValueError("the parameters of a group cannot be changed")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{key} must be a finite number >= 0, not {value!r}")
        changed = []
        for i, g in self._groups_holding(key, group):
            old = tensors.as_float(g[key])
            if isinstance(g[key], torch.Tensor):
                g[key].fill_(value)
            else:
                g[key] = type(g[key])(value) if isinstance(g[key], int) and float(value).is_integer() else value
            changed.append({"group": i, "old": old, "new": value})
        return self.log("param_group", key=key, value=value, groups=changed)

    def _groups_holding(self, key: str, group: int | None) -> list[tuple[int, dict[str, Any]]]:
        """The param groups `group` names (all: None), each holding `key` as a number; else
        the refusal, before anything is changed."""
        targets = []
        for opt in list(self.model.optimizers):
            for i, g in enumerate(opt.param_groups):
                if group is not None and i != group:
                    continue
                numeric = sorted(k for k, v in g.items() if _is_number(v) and k != "lr")
                if key not in numeric:
                    raise KeyError(f"param group {i} has no {key!r} that is a number; it has {', '.join(numeric) or 'none'}")
                targets.append((i, g))
        if not targets:
            raise ValueError(f"no param group {group}" if group is not None else "no optimizer seen yet")
        return targets

    def skip_step(self) -> dict[str, Any]:
        """Do not apply this step's update (the optimizer sees no gradients this once)."""
        st = self.model.ensure_step()
        if not self.model.optimizers:
            raise RuntimeError("no optimizer: a manual update cannot be skipped by stepdbg")
        if st.optimizer_stepped:
            raise RuntimeError(f"step {st.index}'s update was already applied")
        if st.skip:  # (a second break in the step, both skipping, or k pressed twice): one skip, logged once
            return {"what": "skip", "step": st.index, "target_step": st.index, "already": True}
        st.skip = True  # (whether the loss it computed is the bad one: the words fit the break, data_wait's is not)
        return self.log("skip", target_step=st.index, bad_loss=any(not math.isfinite(v) for v in st.losses))

    def hide_grads(self, opt: torch.optim.Optimizer) -> None:
        """A skipped step: optimizers pass over parameters whose .grad is None (state
        untouched); restore_grads() puts them back after the update."""
        self.hidden = [(p, p.grad) for p in opt_params(opt) if p.grad is not None]
        for p, _ in self.hidden:
            p.grad = None

    def restore_grads(self) -> None:
        for p, g in self.hidden:
            p.grad = g
        self.hidden = []


def _set_group_lr(group: dict[str, Any], lr: float) -> None:
    if isinstance(group["lr"], torch.Tensor):
        group["lr"].fill_(lr)
    else:
        group["lr"] = lr


def _is_number(v: Any) -> bool:
    if isinstance(v, torch.Tensor):
        return v.numel() == 1 and v.is_floating_point()
    return isinstance(v, (int, float)) and not isinstance(v, bool)

