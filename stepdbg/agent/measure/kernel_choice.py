"""What chooses the kernels a forward runs: autocast (on, dtype and cache, per device
type), the attention backends that ``sdpa_kernel`` allows, cuDNN's flags, TF32 matmul
precision and deterministic algorithms.

``current()`` reads them (a dozen flag reads, about 3 µs) when the step's forward starts;
``applied(choice)`` puts them back around a forward that stepdbg runs again, so the replay
runs the kernels the step ran: under the step's bf16 autocast, not in float32 (where an
fp16 overflow does not happen and CUDA picks another attention kernel), and inside the
step's ``sdpa_kernel(SDPBackend.MATH)``, even though the pause is outside it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

AUTOCAST_DEVICES = ("cpu", "cuda")
_SDP = ("flash", "mem_efficient", "math", "cudnn")  # torch.backends.cuda.<name>_sdp_enabled / enable_<name>_sdp


def current() -> dict[str, Any]:
    """The kernel choice in force now, on this thread."""
    cuda, cudnn = torch.backends.cuda, torch.backends.cudnn
    return {
        "autocast": _autocast(),
        "autocast_cache": torch.is_autocast_cache_enabled(),
        "sdp": {n: getattr(cuda, f"{n}_sdp_enabled")() for n in _SDP if hasattr(cuda, f"{n}_sdp_enabled")},
        "cudnn": (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic": (torch.are_deterministic_algorithms_enabled(),
                          torch.is_deterministic_algorithms_warn_only_enabled()),
    }


def _autocast() -> dict[str, tuple[bool, torch.dtype]]:
    """Autocast per device type; empty before torch 2.4, whose autocast queries take none."""
    try:
        return {d: (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in AUTOCAST_DEVICES}
    except (TypeError, AttributeError):
        return {}


@contextlib.contextmanager
def applied(choice: dict[str, Any] | None) -> Iterator[None]:
    """Run the block under `choice` (from current()); everything is as before afterwards.
    None: the block runs as things are."""
    if not choice:
        yield
        return
    before = current()
    with contextlib.ExitStack() as stack:
        for dev, state in choice["autocast"].items():
            if state != before["autocast"].get(dev):  # only where it differs: no autocast("cuda") without CUDA
                on, dtype = state
                stack.enter_context(torch.autocast(dev, dtype=dtype, enabled=on,
                                                   cache_enabled=choice["autocast_cache"]))
        if {k: v for k, v in choice.items() if k != "autocast"} != {k: v for k, v in before.items() if k != "autocast"}:
            stack.callback(_set_globals, before)
            _set_globals(choice)
        yield


def _set_globals(choice: dict[str, Any]) -> None:
    cuda, cudnn = torch.backends.cuda, torch.backends.cudnn
    for n, on in choice["sdp"].items():
        getattr(cuda, f"enable_{n}_sdp")(on)
    cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32 = choice["cudnn"]
    torch.set_float32_matmul_precision(choice["matmul_precision"])
    mode, warn_only = choice["deterministic"]
    torch.use_deterministic_algorithms(mode, warn_only=warn_only)
