"""The evidence bundle: what a replay of a break's step needs, on disk, so the step can be
replayed after the job went on (``--on-break save --on-break skip``), or on another machine
(``stepdbg replay PATH``, offline.py).

A directory ``stepdbg-step<N>[-rank<R>]`` holding:

- ``tensors.pt``: the step-start parameters and buffers of the model (the rewind snapshot's
  when the update was already applied), every optimizer's ``state_dict``, the captured
  batch and model inputs, the gradient at the model output, the RNG states. In torch's own
  format, loadable with ``torch.load(weights_only=True)``: tensors, numbers, strings and
  plain containers only. Anything else the inputs held is left out and listed.
- ``meta.json``: the break record, the kernel choice (autocast, SDPA backends, cuDNN and
  TF32 flags), whether the step's output was finite, the last records of the step history,
  the model's class by import path and the file it is defined in with its SHA-256, its
  module tree as data (each module's class, plain attributes, parameters and children:
  module_tree.py), the script and its arguments, the torch, stepdbg and Python versions.

A save is atomic and private: the files are written (O_EXCL, O_NOFOLLOW, 0600) into a
fresh temporary directory (0700) beside, which is renamed to a free name (``-2``, ``-3``
are tried; a planted symlink or directory is never followed or replaced) once both are
whole. On any failure (a full disk, a signal) nothing of it is left, and the error is
raised as itself (no space left; the job's own KeyboardInterrupt or SystemExit), not as
torch's wrapping of it. What a SIGKILL left is removed by the next save there
(partials.py). At most MAX_BUNDLES a process.

Reading one back (``read``) treats it as untrusted data: meta.json and tensors.pt must be
regular files (no link followed), meta.json is read up to META_CAP bytes, tensors.pt with
``weights_only=True``, and every field is checked (bundle_check.py) before it is used.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from stepdbg.agent.measure import rank_origin
from stepdbg.agent.measure.frames import site_where
from stepdbg.agent.measure.tensors import sharded_across_ranks
from stepdbg.agent.replay import bundle_check, module_tree, partials
from stepdbg.agent.replay.bundle_check import FORMAT, BundleError
from stepdbg.agent.step import backward_capture
from stepdbg.version import __version__
from stepdbg.wire.protocol import plain

MAX_BUNDLES = 10  # a process's bundles: `--break every=1 --on-break save` stops saving after these
META_CAP = 16 << 20  # bytes of meta.json read at most (a saved one is a few KB)
HISTORY = 100  # the step records kept (the advice reads the recent ones)
_OPEN = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


def _free_name(parent: Path, name: str) -> Path:
    """`name` (or `name-2`, ...) under `parent`, where nothing is, not even a dangling link."""
    for n in range(1, 1000):
        path = parent / (name if n == 1 else f"{name}-{n}")
        if not os.path.lexists(path):
            return path
    raise BundleError(f"no free name for {name} in {parent}")


class _Recorded:
    """A file torch.save writes through, keeping what a write raised: torch wraps it in a
    RuntimeError (`unexpected pos ...`) that names neither a full disk nor a signal."""

    def __init__(self, f: Any) -> None:
        self._f, self.raised = f, None  # type: BaseException | None

    def write(self, data: Any) -> int:
        try:
            return self._f.write(data)
        except BaseException as e:  # noqa: B036 - kept to be raised again as itself (ENOSPC, Ctrl-C, SystemExit)
            self.raised = self.raised or e
            raise

    def flush(self) -> None:
        self._f.flush()


def _atomically(parent: Path, name: str, fill: Callable[[Path], None]) -> Path:
    """`fill` a private (0700) temporary directory under `parent`, then rename it to a free
    `name`: its path. When anything fails (a full disk, a signal), nothing of it is left."""
    partials.sweep(parent)  # what a killed save left here (SIGKILL: no Python ran to remove it)
    tmp = Path(tempfile.mkdtemp(prefix=partials.prefix(name), dir=parent))
    try:
        with partials.held(tmp):  # (a sweep elsewhere leaves a folder a save holds)
            fill(tmp)
            final = _free_name(parent, name)
            os.rename(tmp, final)
        return final
    except BaseException:  # noqa: B036 - nothing of a failed save is left, whatever ended it
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def created(path: Path) -> Iterator[_Recorded]:
    """A file this call creates (O_EXCL, O_NOFOLLOW, 0600), open for binary writing; an
    error a write raised comes out as itself (OSError: no space left; a signal's exception)."""
    f = os.fdopen(os.open(path, _OPEN, 0o600), "wb")
    out = _Recorded(f)
    try:
        with f:
            yield out
    except Exception as e:
        if out.raised is not None and out.raised is not e:
            raise out.raised from None
        raise


def weights_only(value: Any, where: str, left_out: list[str]) -> Any:
    """`value` as torch.load(weights_only=True) reads it back: tensors (detached), numbers,
    strings, None, and dicts, lists and tuples of these. Anything else becomes None and its
    place is added to `left_out`."""
    if isinstance(value, torch.Tensor):
        return value.detach()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):  # (a dict subclass, HF's BatchEncoding, comes back a dict)
        out = {}
        for k, v in value.items():
            if isinstance(k, (str, int)):
                out[k] = weights_only(v, f"{where}[{k!r}]", left_out)
            else:
                left_out.append(f"{where}: a key of type {type(k).__name__}")
        return out
    if isinstance(value, (list, tuple)):
        items = [weights_only(v, f"{where}[{i}]", left_out) for i, v in enumerate(value)]
        return tuple(items) if isinstance(value, tuple) else items
    left_out.append(f"{where}: a {type(value).__name__}")
    return None


def model_source(root: torch.nn.Module, argv: list[str]) -> dict[str, Any]:
    """How `stepdbg replay` finds the model's code: its class by import path, the file that
    defines it (and its hash, to tell when the code changed since), the script."""
    cls = type(root)
    file = _class_file(cls)
    digest = None
    if file and os.path.isfile(file):
        digest = hashlib.sha256(Path(file).read_bytes()).hexdigest()
    script = _script(argv)
    return {"module": cls.__module__, "qualname": cls.__qualname__, "file": os.path.abspath(file) if file else None,
            "code_sha256": digest, "script": script}


_OWN = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the stepdbg package


def _users(file: Any) -> bool:
    """`file` is a .py file that is not one of stepdbg's own (its launcher's bootstrap.py)."""
    return (isinstance(file, str) and file.endswith(".py") and os.path.isfile(file)
            and not os.path.abspath(file).startswith(_OWN + os.sep))


def _class_file(cls: type) -> str | None:
    """The file `cls` is defined in, from its own functions' code (co_filename): its module's
    __file__ names another file once the launched script has ended (an exception break),
    when `__main__` is the launcher's module again."""
    for value in vars(cls).values():
        fn = getattr(value, "__func__", getattr(value, "fget", value))
        code = getattr(fn, "__code__", None)
        if code is not None and _users(code.co_filename):
            return code.co_filename
    try:
        file = inspect.getsourcefile(cls)
    except (TypeError, OSError):
        return None
    return file if file and not (cls.__module__ == "__main__" and not _users(file)) else None


def _script(argv: list[str]) -> str | None:
    """The training script's absolute path: __main__'s file while the launched script runs
    (runpy's module; `python -m pkg.train`'s too); at an exception break, when the script
    has ended and `__main__` is the launcher's again, the script's frame in the traceback
    being handled (the save runs on the training thread inside the launcher's `except`);
    else the script the command line names."""
    file = getattr(sys.modules.get("__main__"), "__file__", None)
    if _users(file):
        return os.path.abspath(file)
    tb = sys.exc_info()[2]
    while tb is not None:
        g = tb.tb_frame.f_globals
        if g.get("__name__") == "__main__" and _users(tb.tb_frame.f_code.co_filename):
            return os.path.abspath(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    args = argv[1:] if argv and not str(argv[0]).endswith(".py") else argv
    if len(args) >= 2 and args[0] == "-m":
        return _module_file(args[1])
    return os.path.abspath(args[0]) if args and _users(args[0]) else None


def _module_file(name: str) -> str | None:
    """The file of the module `python -m NAME` ran (its spec's origin), when it is the user's."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec else None
    return os.path.abspath(origin) if _users(origin) else None


def _tree(root: torch.nn.Module) -> dict[str, Any] | None:
    """The module tree (module_tree.py), or None: a module's odd attributes (a property
    that raises, a key that is not a string) leave the tree out, never the bundle."""
    try:
        return module_tree.record(root)
    except Exception:
        return None


def called_from(site: Any) -> list[Any] | None:
    """The user's line that called the model (file, line, function) with its code: a replay
    elsewhere places an op of torch's own modules there, and reads no file for it."""
    if not site:
        return None
    return [str(site[0]), int(site[1]), str(site[2]), site_where(site)["code"][:500]]


def kernels_json(choice: Any) -> Any:
    """The kernel choice (kernel_choice.current()) with its dtypes as their names."""
    if not choice:
        return None
    return [[str(v) if isinstance(v, torch.dtype) else v for v in part] for part in choice]


def kernels_from_json(data: Any) -> Any:
    if not data:
        return None
    return tuple(tuple(getattr(torch, v.removeprefix("torch.")) if isinstance(v, str) and v.startswith("torch.")
                       else v for v in part) for part in data)


def step_start_parameters(root: torch.nn.Module, phase: str, snapshots: list[Any], step: int
                          ) -> tuple[dict[str, torch.Tensor], str]:
    """The parameters the step started from, and which: "step_start", or, after the update
    with no snapshot of the step's start to take them from, "after_update"."""
    live = dict(root.named_parameters())
    if phase != "after_optimizer_step":
        return {n: p.detach() for n, p in live.items()}, "step_start"
    names = {id(p): n for n, p in live.items()}
    for snap in snapshots:
        if snap.step == step:
            saved = {names[id(t)]: copy for t, copy in snap.pairs if id(t) in names}
            if len(saved) == len(live):
                return saved, "step_start"
    return {n: p.detach() for n, p in live.items()}, "after_update"


def write(directory: Path, name: str, root: torch.nn.Module, cap: dict[str, Any], brk: dict[str, Any],
          extra: dict[str, Any]) -> Path:
    """Write the bundle of the captured step `cap` of model `root` (eager, unwrapped) under
    `directory`; `extra`: optimizers, snapshots, output_finite, history, argv, rank."""
    if not directory.is_dir():
        raise BundleError(f"{directory} is not a directory")
    left_out: list[str] = []
    sharded = sharded_across_ranks(root)
    if sharded:
        params, which = {}, "sharded"
    else:
        params, which = step_start_parameters(root, brk.get("phase") or "", extra.get("snapshots") or [],
                                              int(cap.get("step", -1)))
    backward_capture.settle(cap)  # (of several outputs, the gradient the replay starts from)
    buffers = cap.get("buffers") or {n: b for n, b in root.named_buffers()}
    rng = cap.get("rng") or {}
    data = {
        "parameters": params,
        "buffers": weights_only(buffers, "buffers", left_out),
        "optimizers": [weights_only(o.state_dict(), f"optimizer {i}", left_out)
                       for i, o in enumerate(extra.get("optimizers") or [])] if not sharded else [],
        "args": weights_only(cap.get("args"), "args", left_out),
        "kwargs": weights_only(cap.get("kwargs") or {}, "kwargs", left_out),
        "batch": weights_only(cap.get("batch"), "batch", left_out),
        "grad_output": weights_only(cap.get("grad_output"), "grad_output", left_out),
        "grad_output_at": cap.get("grad_output_at"),  # (which of the model's outputs it is the gradient of)
        "outputs_direct": list(cap.get("outputs_direct") or []),  # (those the loss reached: two, a partial backward)
        "rng": {"cpu": rng.get("cpu"), "cuda": list(rng.get("cuda") or [])},
        "sample_indices": weights_only(cap.get("sample_indices"), "sample_indices", left_out),
    }
    first = next(iter(params.values()), None)
    if rank_origin.own_loss_nonfinite(brk):  # this rank's own loss: the others' bundles name this rank
        rank_origin.publish(cap.get("step"))
    meta = {
        "format": FORMAT, "step": cap.get("step"), "rank": extra.get("rank"), "break": brk,
        "world": rank_origin.world(), "born_on_rank": rank_origin.born_on(cap.get("step")),
        "parameters": which, "sharded": sharded, "device": str(first.device) if first is not None else "cpu",
        "output_finite": extra.get("output_finite"), "kernels": kernels_json(cap.get("kernels")),
        "history": list(extra.get("history") or [])[-HISTORY:], "model": {**model_source(root, extra.get("argv") or []), "name": extra.get("name") or ""},
        "modules": _tree(root), "called_from": called_from(cap.get("called_from")),
        "argv": list(extra.get("argv") or []), "left_out": left_out,
        "versions": {"torch": torch.__version__, "stepdbg": __version__, "python": platform.python_version()},
    }
    def fill(path: Path) -> None:
        with created(path / "tensors.pt") as f:
            torch.save(data, f)
        with created(path / "meta.json") as f:
            f.write(json.dumps(plain(meta), indent=1).encode())

    return _atomically(directory, name, fill)


def read(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(meta, tensors) of the bundle at `path`, both checked (bundle_check.py); tensors
    loaded with weights_only=True, on the CPU. Anything wrong: BundleError, one line."""
    meta_path, tensors_path = path / "meta.json", path / "tensors.pt"
    if not path.is_dir() or not os.path.lexists(meta_path) or not os.path.lexists(tensors_path):
        raise BundleError(f"{path} is not an evidence bundle (it needs meta.json and tensors.pt)")
    meta = bundle_check.meta(meta_path, bundle_check.read_capped(meta_path, META_CAP))
    meta["modules"] = module_tree.checked(meta_path, meta.get("modules"))
    try:
        with bundle_check.opened(tensors_path) as f:  # (read, not mapped: a file cut short under a map is SIGBUS)
            data = torch.load(f, map_location="cpu", weights_only=True)
    except BundleError:
        raise
    except Exception as e:  # a damaged or foreign file: torch's own reason, in one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BundleError(f"{tensors_path}: not a bundle's tensors ({first[:300]})") from None
    return meta, bundle_check.tensors(tensors_path, data)


def size_of(root: torch.nn.Module) -> int:
    """Bytes of the parameters and buffers (what the bundle mostly holds)."""
    return sum(t.numel() * t.element_size() for t in [*root.parameters(), *root.buffers()])


__all__ = ["FORMAT", "MAX_BUNDLES", "BundleError", "read", "size_of", "write"]
