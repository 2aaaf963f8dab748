"""The attributes of an object of the paused frame, for the TUI's REPL line's Tab after a dot
(`model.he<Tab>`), read through the `eval` request (the line sends
`__import__("stepdbg.agent.views.completion", ...).attribute_names(model, ("head",), "we", 60)`).

Read without running the user's code: no property, no `__getattr__`, no `__dir__` of theirs, no
`__getattribute__`, `__class__`, `__eq__` or `__hash__` of theirs or of their metaclass. Only
what Python keeps is read, by C code alone: a type (`type(x)`), a class's MRO and namespace
(type's own descriptors), an object's `__dict__` (where Python's own descriptor holds it), a
dict's own storage (`dict.items`, not a subclass's methods), and names that are plain `str`
(a `str` subclass key could hash, compare and sort by code of its own; inspect.getattr_static,
isinstance and type.__dir__ each ran some). The path after the name is followed through what
an object holds itself (its `__dict__`, a slot, a module's submodules, parameters and buffers)
and plain class attributes, never through another descriptor.
Bounded: at most `cap` names, of at most LIMIT characters in all, from at most MRO_CAP classes.

Asked by its own op (`complete`: frame_names), not by an evaluated line: the line's
`__import__(...)` was looked up in the paused frame first (a script's own `__import__` ran),
and each Tab went through the eval's machinery (its stdout, its write-back) for a read."""

from __future__ import annotations

import heapq
import re
import sys
import types
from collections.abc import Iterator
from typing import Any

import torch

LIMIT = 1500  # characters of the names returned (the eval's value is cut at 2000)
MRO_CAP = 256  # classes of an MRO whose names are read (a real one has a few dozen)
_MISSING = object()
_REGISTRIES = ("_parameters", "_buffers", "_modules")  # what an nn.Module's __getattr__ reads
_MRO = type.__dict__["__mro__"].__get__  # a class's MRO as Python keeps it (no metaclass's mro())
_NAMESPACE = type.__dict__["__dict__"].__get__  # a class's own namespace (no metaclass's __getattribute__)


def _frame_locals_type() -> type:
    return type(sys._getframe().f_locals)  # (a function's: a dict, or 3.13's FrameLocalsProxy, C code)


_FRAME_LOCALS = _frame_locals_type()


def _is_class(obj: Any) -> bool:
    return issubclass(type(obj), type)  # (isinstance(obj, type) reads obj.__class__: a property's code)


def _classes(cls: type) -> tuple[type, ...]:
    return (_MRO(cls) or (cls,))[:MRO_CAP]


def _entries(d: Any) -> Iterator[tuple[str, Any]]:
    """The entries of a dict, or a class's namespace, whose key is a plain str."""
    if issubclass(type(d), dict):
        items = dict.items(d)  # (a dict subclass's own items(), __iter__ or __getitem__ never run)
    elif type(d) is types.MappingProxyType or type(d) is _FRAME_LOCALS:
        items = d.items()  # (a class's namespace: its dict's own items; a 3.13 function frame's locals)
    else:
        return
    for k, v in items:
        if type(k) is str:
            yield k, v


def _get(d: Any, name: str) -> Any:
    """`d[name]` found by comparing plain strs (a lookup compares the key with any other of the
    same hash, by its own __eq__), else _MISSING."""
    return next((v for k, v in _entries(d) if k == name), _MISSING)


def _in_classes(cls: type, name: str) -> Any:
    """`name` in the namespaces of `cls`'s MRO, as Python finds it on the class, else _MISSING."""
    for c in _classes(cls):
        value = _get(_NAMESPACE(c), name)
        if value is not _MISSING:
            return value
    return _MISSING


class _Plain:
    pass


# Python's own `__dict__` descriptors: a class's (it says this doc), a function's, a module's (a
# slot). Another C type's may run code: wrapt's ObjectProxy reads the wrapped object's __dict__
# attribute, through its __getattribute__.
_PYTHONS_DICT_DOC = _Plain.__dict__["__dict__"].__doc__
_FUNCTIONS_DICT = types.FunctionType.__dict__["__dict__"]


def _own(obj: Any) -> dict[str, Any]:
    """The object's own `__dict__`, where Python's own descriptor holds it (not a property)."""
    if _is_class(obj):
        return {}
    held = _in_classes(type(obj), "__dict__")
    kind = type(held)  # (compared by identity: `in` a tuple would call a metaclass's __eq__)
    pythons = kind is types.MemberDescriptorType or (
        kind is types.GetSetDescriptorType and (held is _FUNCTIONS_DICT or held.__doc__ == _PYTHONS_DICT_DOC))
    if not pythons or held.__name__ != "__dict__":
        return {}
    try:
        d = held.__get__(obj, type(obj))
    except Exception:
        return {}
    return d if issubclass(type(d), dict) else {}


def _descriptor(value: Any) -> bool:
    return _in_classes(type(value), "__get__") is not _MISSING


def _on_class(obj: Any, name: str) -> tuple[Any, bool]:
    """`name` on obj's class as `obj.name` would use it, without code: its value (else _MISSING),
    and whether it decides `obj.name` (a slot, read by Python's own descriptor, or a property,
    which are code and win over the instance's dict; a method gives way to the instance's own)."""
    value = _in_classes(type(obj), name)
    if value is _MISSING or not _descriptor(value):
        return value, False
    if type(value) is types.MemberDescriptorType:
        try:
            return value.__get__(obj, type(obj)), True
        except Exception:  # (an empty slot)
            return _MISSING, True
    return _MISSING, any(_in_classes(type(value), m) is not _MISSING for m in ("__set__", "__delete__"))


def _attribute(obj: Any, name: str) -> Any:
    """`obj.name` where reading it runs no code of the user's, else _MISSING."""
    if _is_class(obj):
        value = _in_classes(obj, name)
        return _MISSING if _descriptor(value) else value
    on_class, decides = _on_class(obj, name)
    if decides:
        return on_class
    own = _own(obj)
    value = _get(own, name)
    if value is not _MISSING or on_class is not _MISSING:
        return on_class if value is _MISSING else value
    if issubclass(type(obj), torch.nn.Module):
        return next((v for r in _REGISTRIES if (v := _get(_get(own, r), name)) is not _MISSING), _MISSING)
    return _MISSING


def _names(obj: Any) -> tuple[Iterator[str], Iterator[str]]:
    """Every name of `obj` that is a plain str (some twice): its own (its `__dict__`, a module's
    submodules, parameters and buffers), then its class's."""
    own = _own(obj)

    def owned() -> Iterator[str]:
        yield from (k for k, _ in _entries(own))
        if issubclass(type(obj), torch.nn.Module):
            for registry in _REGISTRIES:
                yield from (k for k, _ in _entries(_get(own, registry)))

    classes = (k for c in _classes(obj if _is_class(obj) else type(obj)) for k, _ in _entries(_NAMESPACE(c)))
    return owned(), classes


def attribute_names(root: Any, path: tuple[str, ...], prefix: str, cap: int = 60) -> str:
    """The attribute names of `root.path...` that begin with `prefix`, space-separated, its
    own sorted, then its class's ("_" names only where the prefix begins with one); "" where the path cannot be
    followed without running code."""
    obj = root
    for name in path:
        obj = _attribute(obj, name)
        if obj is _MISSING:
            return ""
    hidden = not prefix.startswith("_")
    owned, classes = _names(obj)
    mine, its = ({n for n in names if n.startswith(prefix) and n.isidentifier() and not (hidden and n[0] == "_")}
                 for names in (owned, classes))
    out: list[str] = []  # (its own first: `model.` listed 12 of nn.Module's methods before `head`)
    for n in [*heapq.nsmallest(cap, mine), *heapq.nsmallest(cap, its - mine)][:cap]:
        if sum(len(x) + 1 for x in out) + len(n) > LIMIT:
            break
        out.append(n)
    return " ".join(out)


_DOTTED = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")  # (Python's names: `été` too, as \w is)
_PREFIX = re.compile(r"\w*")


class NotHere(LookupError):
    """The name is not in the paused frame, or what was asked is not a dotted name."""


def frame_names(frame: Any, dotted: str, prefix: str, cap: int = 60) -> list[str]:
    """The attributes of `dotted` (`model.head`: a name of the paused frame, its locals, its
    globals or builtins, then attributes) that begin with `prefix`, as attribute_names reads
    them; with `dotted` "", the frame's own names (what `vars()` there holds); NotHere where
    there is no such name."""
    if not (dotted == "" or _DOTTED.fullmatch(dotted)) or not _PREFIX.fullmatch(prefix):
        raise NotHere(f"complete takes a dotted name and the start of an attribute, not {dotted!r} and {prefix!r}")
    if frame is None:
        raise NotHere("no paused frame of yours to complete in")
    if dotted == "":
        return own_names(frame.f_locals, prefix)
    root, *path = dotted.split(".")
    for scope in (frame.f_locals, frame.f_globals, frame.f_builtins):
        value = _get(scope, root)
        if value is not _MISSING:
            return attribute_names(value, tuple(path), prefix, cap).split()
    raise NotHere(f"no {root} in the paused frame")


NAMES_MOST = 1000  # a frame's names told at once (a script's top level holds a few hundred)
NAMES_CHARS = 20_000


def own_names(scope: Any, prefix: str) -> list[str]:
    """The names of a frame's `scope` (its locals; a script's top level: its globals) that
    begin with `prefix`, sorted, read by plain-str lookups (the `vars()` an evaluated line
    asked for ran a script's own `vars` or `sorted`); dunders only where `prefix` begins with
    "__"; at most NAMES_MOST of them, NAMES_CHARS characters in all."""
    hidden = not prefix.startswith("__")
    found = heapq.nsmallest(NAMES_MOST, {k for k, _ in _entries(scope) if k.startswith(prefix) and k.isidentifier()
                                         and not (hidden and k.startswith("__") and k.endswith("__"))})
    out: list[str] = []
    told = 0
    for n in found:
        told += len(n) + 1
        if told > NAMES_CHARS:
            break
        out.append(n)
    return out
