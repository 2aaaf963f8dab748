"""Memory: host RSS (read every step, so /proc/self/statm is kept open) and CUDA's
allocated / reserved / peak per device, where CUDA is in use."""

from __future__ import annotations

import os
from typing import Any

import torch

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


_statm: tuple[int, int] | None = None  # (pid, fd): kept open, it is read every step


def host_rss() -> int | None:
    """Resident set size of this process in bytes (Linux /proc; None elsewhere)."""
    global _statm
    try:
        if _statm is None or _statm[0] != os.getpid():  # a forked child reads its own
            _statm = (os.getpid(), os.open("/proc/self/statm", os.O_RDONLY))
        return int(os.pread(_statm[1], 128, 0).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def _cuda_used() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def memory_in_use() -> int | None:
    """The number `mem>SIZE` compares: CUDA allocated where CUDA is used, else host RSS."""
    if _cuda_used():
        return sum(torch.cuda.memory_allocated(d) for d in range(torch.cuda.device_count()))
    return host_rss()


def memory() -> dict[str, Any]:
    """CUDA allocated / reserved / peak per device (where CUDA is used) and host RSS."""
    out: dict[str, Any] = {"host_rss": host_rss(), "cuda": []}
    if _cuda_used():
        for d in range(torch.cuda.device_count()):
            out["cuda"].append({
                "device": d,
                "name": torch.cuda.get_device_name(d),
                "allocated": torch.cuda.memory_allocated(d),
                "reserved": torch.cuda.memory_reserved(d),
                "peak_allocated": torch.cuda.max_memory_allocated(d),
                "total": torch.cuda.get_device_properties(d).total_memory,
            })
    return out
