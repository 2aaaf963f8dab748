"""Installing and removing what the agent hooks into torch.

Every install returns a handle with an idempotent ``remove()``; the session keeps them
and removes all of them on detach, in reverse order (torch.utils.hooks.RemovableHandle
does the same for torch's own registries).
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable
from typing import Any, Protocol


class Handle(Protocol):
    def remove(self) -> None: ...


_OWN_IDS = itertools.count(-1, -1)
_HANDLE: Any = None  # torch.utils.hooks.RemovableHandle, once own_id imported it (this module imports no torch)


def own_id(handle: Any) -> Any:
    """Renumber a torch hook handle into stepdbg's own (negative) ids.

    torch numbers every hook from one counter (``RemovableHandle.next_id``) and the ids
    are pickled with a module's hooks: without this, a user's hook registered after
    stepdbg's would get another id, and ``torch.save(model)`` another file. An armed step
    renumbers one handle (backward_capture): torch's class is looked up once, and the
    extra dicts (a module hook's always_call, with_kwargs) only when the handle has any."""
    global _HANDLE
    cls = _HANDLE
    if cls is None:
        from torch.utils.hooks import RemovableHandle

        cls = _HANDLE = RemovableHandle
    if not isinstance(handle, cls) or handle.id < 0:
        return handle
    old, new = handle.id, next(_OWN_IDS)
    extra = handle.extra_dict_ref
    for ref in (handle.hooks_dict_ref, *extra) if extra else (handle.hooks_dict_ref,):
        d = ref()
        if d is not None and old in d:
            if next(reversed(d)) == old:  # (the last: as registered, not prepended) same order
                d[new] = d.pop(old)
                continue
            items = [(new if k == old else k, v) for k, v in d.items()]  # same order
            d.clear()
            d.update(items)
    handle.id = new
    if cls.next_id == old + 1:  # nobody registered since: give the number back
        cls.next_id = old
    return handle


class Patch:
    """Replace ``owner.attr`` with ``new`` until ``remove()`` puts the original back.

    A class that inherited the attribute inherits it again after removal (the attribute is
    deleted, not set), so the class looks as it did before."""

    def __init__(self, owner: Any, attr: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]):
        self.owner, self.attr = owner, attr
        self.original = getattr(owner, attr)
        self.own = attr in vars(owner)
        self.installed = functools.wraps(self.original)(make(self.original))
        setattr(owner, attr, self.installed)

    def remove(self) -> None:
        # Only put the original back if nobody patched over us since.
        if getattr(self.owner, self.attr, None) is self.installed:
            if self.own:
                setattr(self.owner, self.attr, self.original)
            else:
                delattr(self.owner, self.attr)
        self.installed = self.original


def around_calls(watched: Callable[[Any], bool], before: Callable[..., None], after: Callable[..., None],
                 skip: Callable[[], bool]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A Patch maker for a class's ``__call__``: ``before(obj, args, kwargs)`` and
    ``after(obj, args, output)`` (output None when the call raised) around the calls of the
    instances `watched` picks, unless `skip()` (torch.compile tracing: then the plain call,
    and nothing in the graph). Lives on the class, so nothing is stored on the instance."""
    def make(orig: Callable[..., Any]) -> Callable[..., Any]:
        def __call__(obj: Any, *args: Any, **kwargs: Any) -> Any:
            if skip() or not watched(obj):
                return orig(obj, *args, **kwargs)
            before(obj, args, kwargs)
            try:
                output = orig(obj, *args, **kwargs)
            except BaseException:
                after(obj, args, None)
                raise
            after(obj, args, output)
            return output

        return __call__

    return make


class HookSet:
    """The handles the agent installed, removed together."""

    def __init__(self) -> None:
        self.handles: list[Handle] = []

    def add(self, handle: Handle) -> Handle:
        self.handles.append(own_id(handle))
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
            self.failed(name, e)
            return None

    def failed(self, name: str, error: Exception) -> None:
        """`name`'s body raised: told once, and off for good."""
        self.disabled.add(name)
        self.on_error(name, error)


class Gate:
    """When the step model's hooks act: on the training thread (the first to reach one),
    while they are installed (active) and nothing of stepdbg's own runs (busy: a replay,
    an evaluation) or waits (halted: a pause). Asked at every hook: one flag, kept as the
    three are set."""

    guard: Guard  # set by the step model

    def __init__(self) -> None:
        super().__init__()
        self.thread: int | None = None  # the training thread, known at its first hook
        self._on = False  # active and not busy and not halted
        self._active = self._busy = self._halted = False

    def tracking(self) -> bool:
        """True on the training thread while nothing of stepdbg's own runs or waits."""
        if self.thread == threading.get_ident():
            return self._on
        if self.thread is None and self._on:
            self.thread = threading.get_ident()  # the training thread is the first to reach a hook
            return True
        return False

    def act(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """A hook entry's body: ``fn(*args)`` when the hooks act now (tracking), run as the
        Guard runs it. The check and the guard in one call: every entry runs every step,
        where each Python call costs about a microsecond (the step's code is cold)."""
        if (self.thread != threading.get_ident() or not self._on) and not self.tracking():
            return None
        guard = self.guard
        if name in guard.disabled:
            return None
        try:
            return fn(*args)
        except guard.passthrough:
            raise
        except Exception as e:
            guard.failed(name, e)
            return None

    @property
    def active(self) -> bool:
        """The hooks are installed (not removed, not in a forked child)."""
        return self._active

    @active.setter
    def active(self, on: bool) -> None:
        self._active = on
        self._regate()

    @property
    def busy(self) -> bool:
        """stepdbg runs model code itself (replay, evaluation, summaries): not the step."""
        return self._busy

    @busy.setter
    def busy(self, on: bool) -> None:
        self._busy = on
        self._regate()

    @property
    def halted(self) -> bool:
        """The training thread is paused."""
        return self._halted

    @halted.setter
    def halted(self, on: bool) -> None:
        self._halted = on
        self._regate()

    def _regate(self) -> None:
        self._on = self._active and not self._busy and not self._halted
