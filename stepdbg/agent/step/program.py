"""What the step model knows of the program's objects: the root modules it saw run a
training forward, the optimizers, schedulers and GradScalers; their parameters and names,
and the learning rates. Held weakly: the program alone keeps its objects alive."""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch

from stepdbg.agent.measure import tensors
from stepdbg.agent.measure.frames import held_as
from stepdbg.agent.step.optimizer_phase import opt_params


class ProgramObjects:
    """The program's models and optimizers, as the step model found them (its base)."""

    def __init__(self) -> None:
        super().__init__()
        self.roots: weakref.WeakValueDictionary[int, torch.nn.Module] = weakref.WeakValueDictionary()
        self._root_refs: dict[int, weakref.ref[torch.nn.Module]] = {}  # the same, asked at every root call
        self.optimizers: weakref.WeakSet[torch.optim.Optimizer] = weakref.WeakSet()
        self._last_optimizer: Callable[[], torch.optim.Optimizer | None] = lambda: None
        self.schedulers: weakref.WeakSet[Any] = weakref.WeakSet()
        self.scalers: weakref.WeakSet[Any] = weakref.WeakSet()  # GradScalers (a rewind restores their scale)
        self._is_model: weakref.WeakKeyDictionary[torch.nn.Module, bool] = weakref.WeakKeyDictionary()
        self._root_names: weakref.WeakKeyDictionary[torch.nn.Module, str] = weakref.WeakKeyDictionary()

    def _is_root(self, module: Any) -> bool:
        ref = self._root_refs.get(id(module))
        return ref is not None and ref() is module

    def is_model_module(self, module: torch.nn.Module) -> bool:
        known = self._is_model.get(module)
        if known is None:
            known = any(p.requires_grad for p in module.parameters())
            self._is_model[module] = known
        return known

    def model_params(self) -> list[torch.nn.Parameter]:
        seen: dict[int, torch.nn.Parameter] = {}
        for root in list(self.roots.values()):
            for p in root.parameters():
                if p.requires_grad:
                    seen[id(p)] = p
        return list(seen.values())

    def params_of_step(self) -> list[torch.nn.Parameter]:
        params = [p for opt in list(self.optimizers) for p in opt_params(opt)]
        return params or self.model_params()

    def param_names(self) -> dict[int, str]:
        names: dict[int, str] = {}
        for root in list(self.roots.values()):
            prefix = self.root_name(root)
            for n, p in root.named_parameters():
                names.setdefault(id(p), ".".join(filter(None, (prefix, n))))
        return names

    def root_name(self, root: torch.nn.Module, frame: FrameType | None = None) -> str:
        """'' in a program of one model; else the model's name, which tells two models' modules
        apart (a GAN's netG.main.0 and netD.main.0, not main.0 twice): the user's variable that
        holds it, in `frame` or the frames around it (kept once found), else its class's name."""
        if len(self.roots) < 2:
            return ""
        name = self._root_names.get(root) or held_as(root, frame or sys._getframe(1))
        if name is None:
            return type(root).__name__
        self._root_names[root] = name
        return name

    def named(self, params: list[torch.nn.Parameter], grads: bool) -> list[tuple[str, torch.Tensor]]:
        """(name, tensor) of each parameter, or of its gradient."""
        names = self.param_names()
        return [
            (names.get(id(p), f"param#{i}") + (".grad" if grads else ""), p.grad if grads else p)
            for i, p in enumerate(params)
            if (p.grad is not None or not grads)
        ]

    def know_optimizer(self, opt: torch.optim.Optimizer) -> None:
        """`opt` takes part in the step (the hooks that run every step ask
        ``_last_optimizer() is not opt`` before calling)."""
        if self._last_optimizer() is not opt:
            self._last_optimizer = weakref.ref(opt)
            if opt not in self.optimizers:  # asked only when another optimizer steps: a Python call
                self.optimizers.add(opt)

    def lrs(self) -> list[float]:
        """The learning rates of the optimizer that stepped last (else of one known)."""
        opt = self._last_optimizer() or next(iter(list(self.optimizers)), None)
        if opt is None:
            return []
        lrs = []
        for g in opt.param_groups:  # (a loop, not a comprehension: no frame of its own, every step)
            lr = g.get("lr")
            lrs.append(lr if type(lr) is float else tensors.as_float(lr))
        return lrs
