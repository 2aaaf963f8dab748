"""What chooses the kernels a forward runs: autocast (on, dtype and cache, per device
type), the attention backends that ``sdpa_kernel`` allows, cuDNN's flags, TF32 matmul
precision and deterministic algorithms.

``current()`` reads them when the step's forward starts, every step, so it is a flat
tuple of torch's own getters (the ones ``torch.backends`` wraps; about 1.5 µs, a third of
what the public properties cost). ``applied(choice)`` puts them back around a forward that
stepdbg runs again, so the replay runs the kernels the step ran: under the step's bf16
autocast, not in float32 (where an fp16 overflow does not happen and CUDA picks another
attention kernel), and inside the step's ``sdpa_kernel(SDPBackend.MATH)``, even though the
pause is outside it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from stepdbg.agent.measure.memory import cuda_in_use

AUTOCAST_DEVICES = ("cpu", "cuda")
_SDP = ("flash", "mem_efficient", "math", "cudnn")  # torch.backends.cuda.<name>_sdp_enabled / enable_<name>_sdp


# (getter in torch._C, how to set it back): what current() reads, in its order. A getter an
# older torch lacks reads as None and is never set.
_FLAGS: tuple[tuple[str, Callable[[Any], None]], ...] = (
    *((f"_get_{n}_sdp_enabled", lambda on, n=n: getattr(torch.backends.cuda, f"enable_{n}_sdp")(on)) for n in _SDP),
    *((f"_get_cudnn_{n}", lambda on, n=n: setattr(torch.backends.cudnn, n, on))
      for n in ("enabled", "benchmark", "deterministic", "allow_tf32")),
    ("_get_float32_matmul_precision", torch.set_float32_matmul_precision),
    ("_get_deterministic_algorithms", lambda on: torch.use_deterministic_algorithms(
        on, warn_only=torch.is_deterministic_algorithms_warn_only_enabled())),
    ("_get_deterministic_algorithms_warn_only", lambda on: torch.use_deterministic_algorithms(
        torch.are_deterministic_algorithms_enabled(), warn_only=on)),
)
(_flash, _mem_efficient, _math, _cudnn_sdp, _cudnn, _cudnn_benchmark, _cudnn_deterministic, _cudnn_tf32,
 _matmul_precision, _deterministic, _warn_only) = (getattr(torch._C, name, lambda: None) for name, _ in _FLAGS)


_UNREAD = (None, None, None, None)  # cuDNN's four flags where CUDA is not in use
_AUTOCAST_OFF = (False, None, False, None, None)  # (what torch.autocast takes for "as now")


def _autocast_state() -> tuple[Any, ...]:
    """(on, dtype) per device type in AUTOCAST_DEVICES, then the cache flag (dtypes and
    cache None where autocast is off everywhere, the common case: two queries); () before
    torch 2.4, whose autocast queries take no device."""
    try:
        if not (torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda")):
            return _AUTOCAST_OFF
        return (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"),
                torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda"),
                torch.is_autocast_cache_enabled())
    except (TypeError, AttributeError):
        return ()


def current() -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The kernel choice in force now, on this thread: (autocast, flags)."""
    # cuDNN's flags choose nothing on the CPU (the SDPA backends do): there, not read, not set back.
    cudnn = (_cudnn(), _cudnn_benchmark(), _cudnn_deterministic(), _cudnn_tf32()) if cuda_in_use() else _UNREAD
    return _autocast_state(), (_flash(), _mem_efficient(), _math(), _cudnn_sdp(), *cudnn, _matmul_precision(),
                               _deterministic(), _warn_only())  # in _FLAGS' order, written out: read every step


@contextlib.contextmanager
def applied(choice: tuple[tuple[Any, ...], tuple[Any, ...]] | None) -> Iterator[None]:
    """Run the block under `choice` (from current()); everything is as before afterwards.
    None: the block runs as things are."""
    if not choice:
        yield
        return
    (autocast, flags), (autocast_now, flags_now) = choice, current()
    with contextlib.ExitStack() as stack:
        if autocast and autocast != autocast_now:
            for i, dev in enumerate(AUTOCAST_DEVICES):
                on, dtype = autocast[2 * i], autocast[2 * i + 1]
                on_now, dtype_now = autocast_now[2 * i: 2 * i + 2]
                if on != on_now or (on and dtype != dtype_now):  # only where it differs: no autocast("cuda") without CUDA
                    stack.enter_context(torch.autocast(dev, dtype=dtype, enabled=on, cache_enabled=autocast[-1]))
        if flags != flags_now:
            stack.callback(_set_flags, flags_now, flags)
            _set_flags(flags, flags_now)
        yield


def _set_flags(want: tuple[Any, ...], now: tuple[Any, ...]) -> None:
    for (_, set_flag), value, was in zip(_FLAGS, want, now, strict=True):
        if value is not None and value != was:
            set_flag(value)
