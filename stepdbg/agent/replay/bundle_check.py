"""What an evidence bundle (bundle.py) may hold, checked before any of it is used.

A bundle is data from wherever it came from: a colleague, a cluster, an attacker. Every
field `stepdbg replay` reads of meta.json and tensors.pt is checked here for its type and
range; anything else is a BundleError in one line that names the file and the field. The
files are read as regular files only (a link, a FIFO or a device is refused before it is
opened for reading, so /dev/zero is never read), meta.json up to a cap.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import torch

from stepdbg.version import __version__

FORMAT = 1  # meta.json's "format": a bundle of another is refused


class BundleError(RuntimeError):
    """A bundle that could not be written or read; the message says why, in one line."""


_DEVICE = re.compile(r"(cpu|cuda|mps|xpu|meta)(:\d{1,3})?")
_ROOT_NAME = re.compile(r"([A-Za-z_]\w{0,99}(\.[A-Za-z_]\w{0,99}){0,7})?")  # (a variable, or a class's name)
_PARAMETERS = ("step_start", "after_update", "sharded")
_OPTIONAL_STR = (str, type(None))


def regular(path: Path) -> os.stat_result:
    """`path`'s stat, when it is a regular file itself (not a link to one)."""
    try:
        st = os.lstat(path)
    except OSError as e:
        raise BundleError(f"{path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise BundleError(f"{path} is {kind}: a bundle holds plain files only")
    return st


@contextlib.contextmanager
def opened(path: Path) -> Iterator[BinaryIO]:
    """The regular file `path`, open for reading: checked before it is opened (a device or a
    FIFO is never opened) and again on the descriptor (a link swapped in between is not
    followed), so what is read is what was checked."""
    regular(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise BundleError(f"{path} is a symbolic link: a bundle holds plain files only") from None
        raise BundleError(f"{path}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BundleError(f"{path} is not a regular file: a bundle holds plain files only")
        yield f


def read_capped(path: Path, cap: int) -> bytes:
    """The bytes of the regular file `path`, refused past `cap` (never read whole)."""
    if regular(path).st_size > cap:
        raise BundleError(f"{path} is over {cap >> 20} MiB: not a bundle's")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            data = f.read(cap + 1)
    except OSError as e:
        raise BundleError(f"{path}: {e.strerror}") from None
    if len(data) > cap:
        raise BundleError(f"{path} is over {cap >> 20} MiB: not a bundle's")
    return data


def _printable(text: str) -> bool:
    return text.isprintable()


def shown(text: str) -> str:
    """`text` as a terminal may show it: control characters (an escape sequence that hides
    or rewrites the lines after it, a carriage return) written as escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _bad(path: Path, field: str, want: str) -> BundleError:
    return BundleError(f"{path}: {field} is not {want} (a damaged or hand-made bundle)")


def _need(path: Path, obj: dict[str, Any], key: str, types: Any, want: str, optional: bool = True) -> Any:
    if key not in obj:
        if optional:
            return None
        raise BundleError(f"{path}: no {key} (a damaged or hand-made bundle)")
    value, kinds = obj[key], types if isinstance(types, tuple) else (types,)
    if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
        raise _bad(path, key, want)
    return value


def _strings(path: Path, field: str, value: Any, cap: int = 10_000) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > cap or not all(isinstance(v, str) for v in value):
        raise _bad(path, field, "a list of strings")
    return value


def _parsed(path: Path, raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise BundleError(f"{path}: not UTF-8 text") from None
    except RecursionError:
        raise BundleError(f"{path}: nested too deep to be a bundle's") from None
    except ValueError as e:
        raise BundleError(f"{path}: not JSON ({e})") from None


def meta(path: Path, raw: bytes) -> dict[str, Any]:
    """meta.json's object, every field the replay reads checked."""
    obj = _parsed(path, raw)
    if not isinstance(obj, dict) or type(obj.get("format")) is not int or obj.get("format") != FORMAT:
        raise BundleError(f"{path}: not a bundle of format {FORMAT} (stepdbg {__version__})")
    _need(path, obj, "step", int, "a step number", optional=False)
    for key in ("rank", "world", "born_on_rank"):  # (world and born_on_rank: a job of many ranks')
        _need(path, obj, key, (int, type(None)), "a rank")
    _need(path, obj, "output_finite", (bool, type(None)), "true, false or null")
    sharded = _need(path, obj, "sharded", _OPTIONAL_STR, "why the parameters were not saved, or null")
    if sharded is not None:
        obj["sharded"] = shown(sharded[:200])
    if obj.get("parameters", "step_start") not in _PARAMETERS:
        raise _bad(path, "parameters", " or ".join(_PARAMETERS))
    device = _need(path, obj, "device", str, "a device") or "cpu"
    if not _DEVICE.fullmatch(device):
        raise _bad(path, "device", "a device such as cpu or cuda:0")
    _break(path, _need(path, obj, "break", dict, "an object") or {})
    model = _need(path, obj, "model", dict, "an object") or {}
    for key in ("module", "qualname", "file", "code_sha256", "script"):
        if not _printable(_need(path, model, key, _OPTIONAL_STR, "a string") or ""):
            raise _bad(path, f"model.{key}", "printable text")
    if not _ROOT_NAME.fullmatch(_need(path, model, "name", _OPTIONAL_STR, "a string") or ""):
        raise _bad(path, "model.name", "the model's name in the program (netD), or empty")
    obj["argv"] = _strings(path, "argv", obj.get("argv"))
    obj["left_out"] = [shown(t) for t in _strings(path, "left_out", obj.get("left_out"))]
    history = _need(path, obj, "history", list, "a list") or []
    if not all(isinstance(h, dict) for h in history):
        raise _bad(path, "history", "a list of objects")
    versions = _need(path, obj, "versions", dict, "an object") or {}
    obj["versions"] = {k: shown(str(versions.get(k, "?"))[:64]) for k in ("torch", "stepdbg", "python")}
    obj["kernels"] = _kernels(path, obj.get("kernels"))
    obj["called_from"] = _site(path, obj.get("called_from"))
    return obj


def _site(path: Path, site: Any) -> tuple[str, int, str, str] | None:
    """The user's line that called the model: [file, line, function, code] (shown, never read)."""
    if site is None:
        return None
    if not (isinstance(site, list) and len(site) == 4 and all(isinstance(v, str) for v in (site[0], site[2], site[3]))
            and type(site[1]) is int and 0 < site[1] < 10 ** 7 and len(site[0]) <= 4096):
        raise _bad(path, "called_from", "[file, line, function, code]")
    return shown(site[0]), site[1], shown(site[2][:200]), shown(site[3][:500])


def _break(path: Path, brk: dict[str, Any]) -> None:
    """The break record as the replay reads it (breaks.Break's fields)."""
    for key in ("phase", "condition"):
        _need(path, brk, key, _OPTIONAL_STR, "a string")
    if not isinstance(brk.get("conditions", []), list) or not all(isinstance(c, str) for c in brk.get("conditions", [])):
        raise _bad(path, "break.conditions", "a list of strings")
    for key in ("scalars", "details"):
        if not isinstance(brk.get(key) or {}, dict):
            raise _bad(path, f"break.{key}", "an object")
    if not all(isinstance(k, str) and k.isidentifier() for k in brk):
        raise _bad(path, "break", "an object of named fields")


def _kernels(path: Path, data: Any) -> Any:
    """The kernel choice, whose "torch.X" strings may only name dtypes (never any other of
    torch's attributes)."""
    if not data:
        return None
    if not isinstance(data, list) or len(data) > 16 or not all(isinstance(p, list) and len(p) <= 64 for p in data):
        raise _bad(path, "kernels", "a list of lists")
    for part in data:
        for v in part:
            if isinstance(v, str) and v.startswith("torch.") and \
                    not isinstance(getattr(torch, v.removeprefix("torch."), None), torch.dtype):
                raise _bad(path, "kernels", "a list of settings and dtypes")
            if not isinstance(v, (str, int, float, bool, type(None))):
                raise _bad(path, "kernels", "a list of settings and dtypes")
    return data


def _tensor_dict(path: Path, field: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise _bad(path, field, "a dict of named values")
    return value


VALUES_CAP = 1_000_000  # values in tensors.pt, counted as every walk of it meets them (a shared list: each time)


def torch_tensors(path: Path, value: Any) -> list[torch.Tensor]:
    """Every tensor in the loaded object (dicts, lists and tuples, a bounded depth). A
    pickle may hold one list many times (a list of the previous list twice, 31 deep: 2**31
    paths in 17 KB); every later walk of it (the replay's, a copy to the device) would meet
    each path, so more than VALUES_CAP of them is refused here."""
    found: list[torch.Tensor] = []
    todo: list[tuple[Any, int]] = [(value, 0)]
    seen = 0
    while todo:
        v, depth = todo.pop()
        seen += 1
        if seen > VALUES_CAP:
            raise _bad(path, "its object", f"a bundle's (over {VALUES_CAP:,} values, nested or shared)")
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif depth <= 32 and isinstance(v, (dict, list, tuple)):
            todo.extend((item, depth + 1) for item in (v.values() if isinstance(v, dict) else v))
    return found


def tensors(path: Path, data: Any) -> dict[str, Any]:
    """tensors.pt's object (already loaded with weights_only=True), its fields checked."""
    if not isinstance(data, dict):
        raise _bad(path, "its object", "a dict")
    params = _tensor_dict(path, "parameters", data.get("parameters"))
    if not all(isinstance(t, torch.Tensor) and t.is_floating_point() and t.layout == torch.strided
               and not t.is_quantized for t in params.values()):
        raise _bad(path, "parameters", "a dict of dense floating-point tensors")
    for t in torch_tensors(path, data):
        if t.layout == torch.strided and t.numel() * t.element_size() > t.untyped_storage().nbytes():
            raise _bad(path, "a tensor", "backed by its data (an expanded view claims more than the file holds)")
    data["parameters"] = params
    data["buffers"] = _tensor_dict(path, "buffers", data.get("buffers"))
    if not isinstance(data.get("kwargs") or {}, dict):
        raise _bad(path, "kwargs", "a dict")
    if not isinstance(data.get("optimizers") or [], list):
        raise _bad(path, "optimizers", "a list")
    rng = data.get("rng") or {}
    cpu = rng.get("cpu") if isinstance(rng, dict) else None
    if not isinstance(rng, dict) or cpu is not None and (not isinstance(cpu, torch.Tensor) or cpu.dtype != torch.uint8):
        raise _bad(path, "rng", "the RNG states (byte tensors)")
    cuda = rng.get("cuda") or []
    if not isinstance(cuda, list) or not all(isinstance(t, torch.Tensor) and t.dtype == torch.uint8 for t in cuda):
        raise _bad(path, "rng.cuda", "a list of byte tensors")
    data["rng"] = {"cpu": cpu, "cuda": cuda}
    for key in ("args", "kwargs", "batch", "grad_output", "sample_indices"):
        data.setdefault(key, None)
    data["sample_indices"] = _indices(path, data["sample_indices"])
    data["grad_output_at"] = _output_index(path, data.get("grad_output_at"))
    data["outputs_direct"] = _output_indices(path, data.get("outputs_direct") or [])
    return data


def _output_index(path: Path, at: Any) -> int | None:
    """Which of the model's outputs grad_output is the gradient of (None: the first)."""
    if at is not None and not (type(at) is int and 0 <= at < 64):
        raise _bad(path, "grad_output_at", "the index of one of the model's outputs")
    return at


def _output_indices(path: Path, direct: Any) -> list[int | None]:
    """The model's outputs the loss reached directly (two or more: a partial backward)."""
    if not isinstance(direct, list) or len(direct) > 64:
        raise _bad(path, "outputs_direct", "a list of the model's outputs")
    return [_output_index(path, i) for i in direct]


def _indices(path: Path, value: Any) -> list[Any] | None:
    """The batch's dataset indices as the replay names them: numbers, and anything else a
    sampler yielded as escaped text (it reaches the terminal)."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        value = value.tolist() if value.numel() <= VALUES_CAP and not value.is_floating_point() else None
    if not isinstance(value, (list, tuple)) or len(value) > VALUES_CAP:
        raise _bad(path, "sample_indices", "a list of dataset indices")
    return [v if isinstance(v, (int, float)) else shown(repr(v))[:200] for v in value]


__all__ = ["FORMAT", "BundleError", "meta", "shown", "read_capped", "regular", "tensors"]
