"""Fingerprints of module calls, in the order they happen: what a step's record holds
for its forward, whoever runs it (the job's own step, recorder.py; a replay of it twice at
a pause, twice.py).

A ``CallLog`` is given each module call's arguments (``call_input``) and outputs
(``call_output``) by forward hooks and keeps one entry per tensor: its qualified name from
the root, its call index in the step, ``input[i]`` or ``output[i]``, the module's class, the
line that called it and the line its forward is defined on. At most `max_calls` calls a
step are kept (``capped`` counts the others). The entry format is stepdbg/wire/step_diff.py's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import torch

from stepdbg.agent.diff.fingerprint import fingerprint, tensors_in

_OWN_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # stepdbg/
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


class CallLog:
    """One step's entries; `name_of(module)` is its qualified name (None: not the model's)."""

    def __init__(self, max_calls: int, name_of: Callable[[torch.nn.Module], str | None],
                 model_called_at: tuple[str, int] | None = None) -> None:
        self.max_calls, self.name_of = max_calls, name_of
        self.model_called_at = model_called_at  # a replay's: the line that called the model in the step
        self.reset(0)

    def reset(self, step: int) -> None:
        self.step = step
        self.entries: list[dict[str, Any]] = []
        self.calls = 0
        self.capped = 0
        self._in_count: dict[str, int] = {}
        self._out_count: dict[str, int] = {}

    def step_start(self, args: Any, kwargs: Any, named: list[tuple[str, torch.Tensor]]) -> None:
        """The step's inputs: the batch (the model's arguments) and its parameters and buffers."""
        for i, t in enumerate(tensors_in([list(args), kwargs or {}])):
            self.add("input", "", f"batch[{i}]", 0, t)
        for name, t in named:
            owner, _, leaf = name.rpartition(".")
            self.add("input", owner, leaf, 0, t)

    def call_input(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        name = self.name_of(module)
        if name is None or name == "":  # (the root's arguments are the batch)
            return
        if self.calls >= self.max_calls:
            return
        call = self._in_count.get(name, 0)
        self._in_count[name] = call + 1
        for i, t in enumerate(tensors_in(list(args))):
            self.add("forward", name, f"input[{i}]", call, t, module)

    def call_output(self, module: torch.nn.Module, output: Any) -> None:
        name = self.name_of(module)
        if name is None:
            return
        if self.calls >= self.max_calls:
            self.capped += 1
            return
        self.calls += 1
        call = self._out_count.get(name, 0)
        self._out_count[name] = call + 1
        found = tensors_in(output)
        for i, t in enumerate(found or [output]):
            self.add("forward", name, "output" if len(found) <= 1 else f"output[{i}]", call, t, module)

    def add(self, phase: str, module: str, what: str, call: int, value: Any,
            mod: torch.nn.Module | None = None) -> None:
        e: dict[str, Any] = {"step": self.step, "phase": phase, "module": module, "what": what, "call": call,
                             "fp": fingerprint(value)}
        if mod is not None:
            e["class"] = type(mod).__name__
            e["file"], e["line"] = call_site() or self.model_called_at or (None, None)
            code = getattr(getattr(type(mod), "forward", None), "__code__", None)
            if code is not None:
                e["defined_at"] = f"{code.co_filename}:{code.co_firstlineno}"
        self.entries.append(e)


def call_site() -> tuple[str, int] | None:
    """The file and line that called the module: the first frame outside torch (its
    Module.__call__ machinery, nn.Sequential's loop) and stepdbg; None when stepdbg called
    the model (a replay), whose caller is not the step's."""
    f = sys._getframe(2)
    model_seen = False
    while f is not None:
        name = f.f_code.co_filename
        if name.startswith(_TORCH_DIR):
            model_seen = True
        elif name.startswith(_OWN_DIR):
            if model_seen:
                return None
        else:
            return name, f.f_lineno
        f = f.f_back
    return None
