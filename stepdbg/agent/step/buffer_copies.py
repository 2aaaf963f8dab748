"""The copies of a model's buffers that an armed replay puts back (BatchNorm's running
statistics, which the forward moves), taken at each forward of its root.

Walking the module tree each step (``named_buffers``) cost more than the copies: 116-189 us
a step for a 122-module model holding no buffer at all, against 0.5 us for the kept walk;
380-540 us against 210-250 us with 24 BatchNorms (timeit, this machine's loaded CPU). The
walk is kept per root and done again every ``REWALK`` steps; between walks a buffer is read from its module by key at each forward, so
one replaced (``self.running_mean = t``) is the new one. A buffer registered after a walk
is copied from the next walk on. Modules are held weakly: the program alone keeps its
model alive.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

REWALK = 256  # steps between walks of a root's module tree


class BufferCopies:
    def __init__(self) -> None:
        self._walks: dict[int, tuple[int, Any, list[tuple[str, Any, str]]]] = {}

    def take(self, root: torch.nn.Module, step: int) -> dict[str, torch.Tensor]:
        """{qualified name: a copy} of `root`'s buffers now, as named_buffers names them."""
        walk = self._walks.get(id(root))
        if walk is None or walk[1]() is not root or not 0 <= step - walk[0] < REWALK:
            walk = self._walks[id(root)] = (step, weakref.ref(root), _where(root))
        copies = {}
        for name, owner_ref, key in walk[2]:
            owner = owner_ref()
            b = owner._buffers.get(key) if owner is not None else None
            if b is not None:
                copies[name] = b.detach().clone()
        return copies


def _where(root: torch.nn.Module) -> list[tuple[str, Any, str]]:
    """(qualified name, the owner module weakly, its key) of each buffer, each tensor once."""
    out, seen = [], set()
    for prefix, m in root.named_modules():
        for key, b in m._buffers.items():
            if b is not None and id(b) not in seen:
                seen.add(id(b))
                out.append((f"{prefix}.{key}" if prefix else key, weakref.ref(m), key))
    return out
