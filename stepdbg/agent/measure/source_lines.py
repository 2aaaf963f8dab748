"""The lines of a frame's source, read without running the user's code.

`linecache` finds the source of a file that is not on disk (a zip's, torch.package's) by
calling its module's loader: `get_source`, a method of whatever class the module's
`__loader__` or `__spec__` names, or a lazy entry that someone's traceback left in the
cache for that file. That is the user's code when the loader is theirs (an import hook),
and the views that read a line (every thread's stack at a stall, a break's code) run on
stepdbg's threads, where it may wait, raise or write. Here a loader is called only when
its class is one of Python's own or torch's (exact types, read by C code), and a file on
disk is read as linecache reads it."""

from __future__ import annotations

import functools
import linecache
import os
import sys
import types
import zipimport
from importlib.machinery import (
    ExtensionFileLoader,
    ModuleSpec,
    SourceFileLoader,
    SourcelessFileLoader,
)
from typing import Any

LOADERS: tuple[type, ...] = (SourceFileLoader, SourcelessFileLoader, ExtensionFileLoader, zipimport.zipimporter)


def line(filename: str, lineno: int, f_globals: Any = None) -> str:
    """Line `lineno` of `filename` ("" where it is not known): `linecache.getline`'s answer."""
    found = lines(filename, f_globals)
    return found[lineno - 1] if 1 <= lineno <= len(found) else ""


def lines(filename: str, f_globals: Any = None) -> list[str]:
    """Every line of `filename`, as `linecache.getlines` gives them; [] where reading them
    would call a loader that is not Python's own or torch's."""
    entry = dict.get(linecache.cache, filename)
    if entry is not None and len(entry) != 1:  # read already: (size, mtime, lines, fullname)
        return entry[2]  # (not copied: callers only read it)
    if filename.startswith("<") and filename.endswith(">"):
        return []
    if _on_disk(filename):
        return linecache.getlines(filename)
    if entry is not None:  # someone's lazy entry: realized by calling it
        return linecache.getlines(filename) if _known_lazy(entry[0]) else []
    known = _known_globals(f_globals)
    if known is not None:
        return linecache.getlines(filename, known)
    return [] if os.path.isabs(filename) else linecache.getlines(filename)  # (sys.path's files only)


def _on_disk(filename: str) -> bool:
    try:
        os.stat(filename)
    except (OSError, ValueError):
        return False
    return True


def _known(loader: Any) -> bool:
    kind = type(loader)
    if kind in LOADERS:
        return True
    package = sys.modules.get("torch.package.package_importer")
    return package is not None and kind is dict.get(vars(package), "PackageImporter")


def _known_lazy(get_lines: Any) -> bool:
    """A lazy entry `functools.partial(loader.get_source, name)` of a known loader."""
    if type(get_lines) is not functools.partial or type(get_lines.func) is not types.MethodType:
        return False
    method = get_lines.func
    if not _known(method.__self__):
        return False
    for kind in type(method.__self__).__mro__:  # (a known loader's class: Python's or torch's own)
        if "get_source" in vars(kind):
            return vars(kind)["get_source"] is method.__func__
    return False


def _known_globals(f_globals: Any) -> dict[str, Any] | None:
    """The module name and loader `linecache` needs, where the frame's module has a known
    loader; None where it has none or one of the user's (read by plain dict lookups)."""
    if not issubclass(type(f_globals), dict):
        return None
    spec, name = dict.get(f_globals, "__spec__"), dict.get(f_globals, "__name__")
    if type(spec) is ModuleSpec:
        loader, name = dict.get(vars(spec), "loader"), dict.get(vars(spec), "name")
    else:
        loader = dict.get(f_globals, "__loader__")
    if type(name) is not str or not name or not _known(loader):
        return None
    return {"__name__": name, "__loader__": loader}
