"""Saved activations by module (``--record-memory``): which module's forward saved the
tensors autograd keeps for the backward.

Only when asked: while the root's forward runs, a ``saved_tensors_hooks`` pair sees each
tensor autograd saves and hands it back unchanged (the same object: same numbers, no
copy), and two global module hooks keep the name of the module whose forward is running.
A weak reference per saved tensor is all that is kept; the next step's forward clears them.
Without it the memory census finds saved activations by walking the autograd graph of the
paused frames' tensors, which costs nothing while the job runs but cannot name modules.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch


class SavedActivations:
    """The saved tensors of the last forward, each with the module that saved it."""

    def __init__(self) -> None:
        self._saved: list[tuple[str, weakref.ref[torch.Tensor]]] = []
        self._names: dict[int, str] = {}
        self._stack: list[str] = []
        self._context: Any = None
        self._handles: list[Any] = []

    def start(self, root: torch.nn.Module) -> None:
        """The root's forward starts: record what it saves, from now until stop()."""
        from torch.nn.modules import module as nn_module

        self.stop()
        self._saved = []
        self._names = {id(m): n or type(root).__name__ for n, m in root.named_modules()}
        self._stack = [self._names[id(root)]]
        self._handles = [nn_module.register_module_forward_pre_hook(self._enter),
                         nn_module.register_module_forward_hook(self._leave, always_call=True)]
        self._context = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
        self._context.__enter__()

    def stop(self) -> None:
        """The root's forward ended (or raised): stop recording; what was saved stays listed."""
        if self._context is not None:
            context, self._context = self._context, None
            context.__exit__(None, None, None)
        for h in self._handles:
            h.remove()
        self._handles = []

    def live(self) -> list[tuple[str, torch.Tensor]]:
        """(module, tensor) for each saved tensor still alive (its graph not yet freed)."""
        out = []
        for module, ref in self._saved:
            t = ref()
            if t is not None:
                out.append((module, t))
        return out

    def _enter(self, module: torch.nn.Module, args: Any) -> None:
        self._stack.append(self._names.get(id(module), type(module).__name__))

    def _leave(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if len(self._stack) > 1:
            self._stack.pop()

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        try:
            self._saved.append((self._stack[-1], weakref.ref(t)))
        except TypeError:  # a tensor that takes no weak reference: not counted
            pass
        return t


def _unpack(t: torch.Tensor) -> torch.Tensor:
    return t
