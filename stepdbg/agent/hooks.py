"""Installing and removing what the agent hooks into torch.

Every install returns a handle with an idempotent ``remove()``; the session keeps them
and removes all of them on detach, in reverse order (torch.utils.hooks.RemovableHandle
does the same for torch's own registries).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol


class Handle(Protocol):
    def remove(self) -> None: ...


class Patch:
    """Replace ``owner.attr`` with ``new`` until ``remove()`` puts the original back."""

    def __init__(self, owner: Any, attr: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]):
        self.owner, self.attr = owner, attr
        self.original = getattr(owner, attr)
        self.installed = functools.wraps(self.original)(make(self.original))
        setattr(owner, attr, self.installed)

    def remove(self) -> None:
        # Only put the original back if nobody patched over us since.
        if getattr(self.owner, self.attr, None) is self.installed:
            setattr(self.owner, self.attr, self.original)
        self.installed = self.original


class HookSet:
    """The handles the agent installed, removed together."""

    def __init__(self) -> None:
        self.handles: list[Handle] = []

    def add(self, handle: Handle) -> Handle:
        self.handles.append(handle)
        return handle

    def patch(self, owner: Any, attr: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Patch:
        p = Patch(owner, attr, make)
        self.handles.append(p)
        return p

    def remove_all(self) -> None:
        while self.handles:
            h = self.handles.pop()
            try:
                h.remove()
            except Exception:  # removal must never fail a shutdown
                pass


class Guard:
    """Runs hook bodies so that a bug in stepdbg never reaches the training loop: a
    failure is reported once through `on_error` and turns that hook off for good."""

    def __init__(self, on_error: Callable[[str, BaseException], None], passthrough: tuple[type[BaseException], ...]):
        self.on_error = on_error
        self.passthrough = passthrough  # what a hook may raise on purpose (abort, Ctrl-C)
        self.disabled: set[str] = set()

    def __call__(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        if name in self.disabled:
            return None
        try:
            return fn(*args)
        except self.passthrough:
            raise
        except Exception as e:
            self.disabled.add(name)
            self.on_error(name, e)
            return None
