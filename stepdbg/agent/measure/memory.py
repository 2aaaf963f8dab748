"""Memory: host RSS (a /proc read, a syscall) or CUDA allocated, which the step model
reads at most every HOST_MEMORY_PERIOD seconds; CUDA's allocated / reserved / peak per device, where CUDA is
in use, with what the allocator holds but no tensor uses; what an out-of-memory error
asked for; torch's allocation history and the snapshot file pytorch.org/memory_viz opens
(``--record-memory``)."""

from __future__ import annotations

import os
import re
from typing import Any

import torch

from stepdbg.agent.measure.frames import exception_text

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# A step's record reads memory if this many seconds passed since the last read: host RSS
# cost a 1.4 ms CPU step 1.3% (18 us: benchmarks, paired runs), and a leak shows over seconds.
HOST_MEMORY_PERIOD = 0.01

_statm: int | None = None  # /proc/self/statm, kept open (a forked child opens its own)
_cuda_seen = False  # CUDA was initialized: it stays so (but for a forked child)
_cuda = torch.cuda


def _forked() -> None:
    global _statm, _cuda_seen
    if _statm is not None:
        try:
            os.close(_statm)  # the parent's statm
        except OSError:
            pass
    _statm, _cuda_seen = None, False


os.register_at_fork(after_in_child=_forked)


def host_rss() -> int | None:
    """Resident set size of this process in bytes (Linux /proc; None elsewhere)."""
    global _statm
    try:
        if _statm is None:
            _statm = os.open("/proc/self/statm", os.O_RDONLY)
        return int(os.pread(_statm, 128, 0).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def cuda_in_use() -> bool:
    """CUDA is there and this process has started using it (nothing here starts it).
    Asked every step: ``is_initialized`` alone (it is never true where CUDA is not there;
    ``is_available`` asks the driver), and once true, remembered."""
    global _cuda_seen
    if not _cuda_seen and _cuda.__dict__.get("_initialized", True):  # (a dict read before a call: every step)
        _cuda_seen = _cuda.is_initialized()
    return _cuda_seen


def cuda_allocated(device: int) -> int:
    """The allocator's allocated bytes on `device` (no sync). `torch.cuda.memory_allocated`
    flattens the allocator's whole statistics into a new dict in Python for this one number
    (most of the default watch's cost on a GPU's 1.9 ms step); its C++ source is read here."""
    stats = getattr(torch._C, "_cuda_memoryStats", None)
    if stats is None:
        return torch.cuda.memory_allocated(device)
    return int(stats(device)["allocated_bytes"]["all"]["current"])


def memory_in_use() -> int | None:
    """The number `mem>SIZE` compares: CUDA allocated where CUDA is used (the allocator's
    counter, no sync), else host RSS."""
    if cuda_in_use():
        return sum(cuda_allocated(d) for d in range(torch.cuda.device_count()))
    return host_rss()


def memory() -> dict[str, Any]:
    """CUDA allocated / reserved / peak per device (where CUDA is used) and host RSS."""
    out: dict[str, Any] = {"host_rss": host_rss(), "cuda": []}
    if cuda_in_use():
        for d in range(torch.cuda.device_count()):
            out["cuda"].append({
                "device": d,
                "name": torch.cuda.get_device_name(d),
                "allocated": torch.cuda.memory_allocated(d),
                "reserved": torch.cuda.memory_reserved(d),
                "peak_allocated": torch.cuda.max_memory_allocated(d),
                "total": torch.cuda.get_device_properties(d).total_memory,
                "fragmented": _stat(d, "inactive_split_bytes.all.current"),
            })
    return out


def _stat(device: int, key: str) -> int | None:
    try:
        return int(torch.cuda.memory_stats(device).get(key, 0))
    except Exception:
        return None


# ---------------------------------------------------------------------- out of memory

_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def is_oom(exc: BaseException) -> bool:
    """torch's OutOfMemoryError (CUDA, and the other accelerators), or the CPU allocator's
    "can't allocate memory" RuntimeError."""
    oom = getattr(torch, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    return isinstance(exc, RuntimeError) and "can't allocate memory" in exception_text(exc)


def asked_bytes(exc: BaseException) -> int | None:
    """The bytes the failing allocation asked for, read from the error's message."""
    text = exception_text(exc)
    # Numbers of a sane length only: '1.2.3 GiB' or a 5,000-digit count (int() refuses past
    # 4,300 digits) made this raise, and the OOM hook turned itself off.
    m = re.search(r"tried to allocate (\d{1,20}) bytes", text, re.IGNORECASE)
    if m:
        return int(m.group(1))
    m = re.search(r"Tried to allocate (\d{1,20}(?:\.\d{1,20})?) (B|KiB|MiB|GiB|TiB)\b", text)
    return int(float(m.group(1)) * _UNITS[m.group(2)]) if m else None


# ---------------------------------------------------------------------- --record-memory


def record_history(on: bool) -> bool:
    """Turn torch's CUDA allocation history on (the stacks memory_viz shows); False where
    there is no CUDA to record."""
    if not torch.cuda.is_available():
        return False
    try:
        torch.cuda.memory._record_memory_history(enabled="all" if on else None)
    except Exception:
        return False
    return on


SNAPSHOT_CAP = 20  # snapshot files one job writes at most (--break every=1 wrote 1.9 GB)


def new_file(stem: str, suffix: str, data: bytes) -> str:
    """Write `data` into a file this call creates in the current directory, a shared place:
    never through a link planted at the name, never over a file that is there (then
    STEM-1SUFFIX, STEM-2SUFFIX, ...). Its absolute path; OSError says why not."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for n in range(100):
        path = f"{stem}-{n}{suffix}" if n else f"{stem}{suffix}"
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:  # a file, or a link (even a dangling one): not ours to replace
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return os.path.abspath(path)
    raise FileExistsError(f"{stem}{suffix} and 99 names after it are taken")


def dump_snapshot(stem: str, made: list[str]) -> tuple[str | None, str | None]:
    """Write the allocation history as STEM.pickle (pytorch.org/memory_viz opens it): its
    path, or None and why not (no CUDA says nothing; the cap and a failed write say so)."""
    if not cuda_in_use():
        return None, None
    if len(made) >= SNAPSHOT_CAP:
        return None, f"not written: this job wrote {SNAPSHOT_CAP} snapshots already (the first: {made[0]})"
    try:
        import pickle

        path = new_file(stem, ".pickle", pickle.dumps(torch.cuda.memory._snapshot()))
    except Exception as e:
        return None, f"not written: {type(e).__name__}: {e}"
    made.append(path)
    return path, None
