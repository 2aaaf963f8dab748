"""The attributes of an object of the paused frame, for the TUI's REPL line's Tab after a dot
(`model.he<Tab>`), read through the `eval` request (the line sends
`__import__("stepdbg.agent.views.completion", ...).attribute_names(model, ("head",), "we", 60)`).

Read without running the user's code: no property, no `__getattr__`, no `__dir__` of theirs.
The path after the name is followed through what an object holds itself (its `__dict__`, a
module's submodules, parameters and buffers) and plain class attributes, never through a
descriptor; the names are the object's own and its type's (`type.__dir__`, the bases' too).
Bounded: at most `cap` names, of at most LIMIT characters in all."""

from __future__ import annotations

import inspect
import types
from typing import Any

import torch

LIMIT = 1500  # characters of the names returned (the eval's value is cut at 2000)
_MISSING = object()
_REGISTRIES = ("_parameters", "_buffers", "_modules")  # what an nn.Module's __getattr__ reads


def _own(obj: Any) -> dict[str, Any]:
    """The object's own `__dict__`, where Python's own descriptor holds it (not a property)."""
    if isinstance(obj, type):
        return {}
    held = inspect.getattr_static(obj, "__dict__", None)
    if not isinstance(held, (types.GetSetDescriptorType, types.MemberDescriptorType)):
        return {}
    try:
        d = object.__getattribute__(obj, "__dict__")
    except Exception:
        return {}
    return d if isinstance(d, dict) else {}


def _attribute(obj: Any, name: str) -> Any:
    """`obj.name` where reading it runs no code of the user's, else _MISSING."""
    own = _own(obj)
    if name in own:
        return own[name]
    if isinstance(obj, torch.nn.Module):
        for registry in _REGISTRIES:
            held = own.get(registry)
            if isinstance(held, dict) and name in held:
                return held[name]
    try:
        value = inspect.getattr_static(obj, name)
    except AttributeError:
        return _MISSING
    if hasattr(type(value), "__get__"):  # a property, a method, a slot: its value is code's
        return _MISSING
    return value


def _names(obj: Any) -> set[str]:
    own = _own(obj)
    names = set(own) | set(type.__dir__(obj if isinstance(obj, type) else type(obj)))
    if isinstance(obj, torch.nn.Module):
        for registry in _REGISTRIES:
            held = own.get(registry)
            names |= {k for k in held if k.isidentifier()} if isinstance(held, dict) else set()
    return {n for n in names if isinstance(n, str)}


def attribute_names(root: Any, path: tuple[str, ...], prefix: str, cap: int = 60) -> str:
    """The attribute names of `root.path...` that begin with `prefix`, space-separated and
    sorted ("_" names only where the prefix begins with one); "" where the path cannot be
    followed without running code."""
    obj = root
    for name in path:
        obj = _attribute(obj, name)
        if obj is _MISSING:
            return ""
    found = sorted(n for n in _names(obj) if n.startswith(prefix) and (prefix.startswith("_") or not n.startswith("_")))
    out: list[str] = []
    for n in found[:cap]:
        if sum(len(x) + 1 for x in out) + len(n) > LIMIT:
            break
        out.append(n)
    return " ".join(out)
