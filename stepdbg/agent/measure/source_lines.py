"""The lines of a frame's source, read without running the user's code.

`linecache` finds the source of a file that is not on disk (a zip's, torch.package's) by
calling its module's loader: `get_source`, a method of whatever class the module's
`__loader__` or `__spec__` names, or a lazy entry that someone's traceback left in the
cache for that file. That is the user's code when the loader is theirs (an import hook),
and the views that read a line (every thread's stack at a stall, a break's code) run on
stepdbg's threads, where it may wait, raise or write. Here a loader is called only when
its class is one of Python's own or torch's (exact types, read by C code) and its instance
shadows none of its class's methods, and a file on disk is read only where it is a regular
file of at most MAX_BYTES: a FIFO or a device named like a source file would block or fill
the view, as `linecache`'s own read (it opens whatever the path names) would; a zip's module
is read only while its archive is a regular file (zipimport opens it again at each read)."""

from __future__ import annotations

import functools
import io
import linecache
import os
import stat
import sys
import tokenize
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
FILE_LOADERS: tuple[type, ...] = LOADERS[:3]  # (their source: the file at their path, or none)
MAX_BYTES = 64 << 20  # a source file larger than this is not read (its lines: []; one of any size was read whole into the cache)


def line(filename: str, lineno: int, f_globals: Any = None) -> str:
    """Line `lineno` of `filename` ("" where it is not known): `linecache.getline`'s answer."""
    found = lines(filename, f_globals)
    text = found[lineno - 1] if 1 <= lineno <= len(found) else ""
    return str.__str__(text) if issubclass(type(text), str) else ""  # (someone's cache entry: a plain str)


def lines(filename: str, f_globals: Any = None) -> list[str]:
    """Every line of `filename`, as `linecache.getlines` gives them; [] where reading them
    would call a loader that is not Python's own or torch's, or open what is not a regular file."""
    if not issubclass(type(filename), str):
        return []
    filename = str.__str__(filename)  # (a code's co_filename may be a str subclass: its methods not called)
    entry = dict.get(linecache.cache, filename)
    if type(entry) is tuple and len(entry) == 4:  # read already: (size, mtime, lines, fullname)
        return entry[2] if type(entry[2]) is list else []  # (not copied: callers only read it)
    if entry is not None and (type(entry) is not tuple or len(entry) != 1):
        return []
    if not filename or filename.startswith("<") and filename.endswith(">"):
        return []
    if _on_disk(filename):
        return _read(filename, filename)
    if entry is not None:  # someone's lazy entry: realized by calling it
        return _lazy(filename, entry[0])
    known = _known_globals(f_globals)
    if known is not None:
        loader, name = known["__loader__"], known["__name__"]
        return _file_source(filename, loader, name) if _one_of(loader, FILE_LOADERS) \
            else linecache.getlines(filename, known)
    return [] if os.path.isabs(filename) else _on_sys_path(filename)


def _one_of(loader: Any, kinds: tuple[type, ...]) -> bool:
    return any(type(loader) is kind for kind in kinds)  # (`in` compares by a metaclass's __eq__)


def _lazy(filename: str, get_lines: Any) -> list[str]:
    if not _known_lazy(get_lines):
        return []
    loader, name = get_lines.func.__self__, get_lines.args[0]
    return _file_source(filename, loader, name) if _one_of(loader, FILE_LOADERS) else linecache.getlines(filename)


def _on_sys_path(filename: str) -> list[str]:
    """A relative name's lines: the first of sys.path's folders holding it, as linecache looks."""
    for folder in sys.path:
        if type(folder) is str and _on_disk(os.path.join(folder, filename)):
            return _read(filename, os.path.join(folder, filename))
    return []


def _on_disk(filename: str) -> bool:
    try:
        os.stat(filename)
    except (OSError, ValueError):
        return False
    return True


def _file_source(filename: str, loader: Any, name: str) -> list[str]:
    """What `loader.get_source(name)` gives (a file loader of Python's), read here as `_read`
    reads, so that its path (a FIFO put where the module's file was) is bounded too."""
    own = vars(loader)
    if type(loader) is not SourceFileLoader or dict.get(own, "name") != name:
        return []  # (a sourceless or extension module has no source; another name: ImportError)
    path = dict.get(own, "path")
    return _read(filename, path) if type(path) is str else []


def _read(filename: str, fullname: str) -> list[str]:
    """`fullname`'s lines, read and cached as `linecache.updatecache` does, where it is a
    regular file of at most MAX_BYTES; else [] (opened without waiting: a FIFO put there
    after a stat does not block)."""
    try:
        fd = os.open(fullname, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError):
        return []
    with os.fdopen(fd, "rb") as raw:
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
                return []
            data = raw.read(MAX_BYTES + 1)
        except OSError:
            return []
    if len(data) > MAX_BYTES:
        return []
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        found = io.TextIOWrapper(io.BytesIO(data), encoding).readlines()
    except (LookupError, UnicodeDecodeError, SyntaxError):
        return []
    if found and not found[-1].endswith("\n"):
        found[-1] += "\n"
    dict.__setitem__(linecache.cache, filename, (st.st_size, st.st_mtime, found, fullname))
    return found


def _known(loader: Any) -> bool:
    package = sys.modules.get("torch.package.package_importer")
    torchs = (dict.get(vars(package), "PackageImporter"),) if package is not None else ()
    if not _one_of(loader, (*LOADERS, *torchs)):
        return False
    if type(loader) is zipimport.zipimporter and not _regular(dict.get(vars(loader), "archive")):
        return False  # (it opens its archive again for each source: a FIFO put there waits for good)
    return _plain(loader)


def _regular(path: Any) -> bool:
    """`path` (a plain str) names a regular file now."""
    try:
        return type(path) is str and stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _plain(loader: Any) -> bool:
    """No attribute set on the loader itself (a known class's) stands for one of its class's
    (get_source, get_data: the user's function put on the instance), and none is a str of a
    subclass (its comparisons run code)."""
    own = vars(loader)  # (the class is a known one: its __dict__ is a plain dict)
    for key, value in dict.items(own):
        if type(key) is not str or issubclass(type(value), str) and type(value) is not str:
            return False
        if any(key in vars(kind) for kind in type(loader).__mro__):
            return False
    return True


def _known_lazy(get_lines: Any) -> bool:
    """A lazy entry `functools.partial(loader.get_source, name)` of a known loader."""
    if type(get_lines) is not functools.partial or type(get_lines.func) is not types.MethodType:
        return False
    if get_lines.keywords or len(get_lines.args) != 1 or type(get_lines.args[0]) is not str:
        return False  # (the module's name, a plain str: a subclass's != runs code)
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
