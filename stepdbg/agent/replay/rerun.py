"""Running the captured step's model again, as every replay, diff and view does: on this
rank alone (out of compile's and DDP's wrappers), on the captured inputs and kernel choice,
on copies of the buffers, with the program's RNG and train/eval modes put back after; and
an origin as a report shows it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from stepdbg.agent.measure import kernel_choice
from stepdbg.agent.measure.tensors import rng_state as _rng_state
from stepdbg.agent.measure.tensors import set_rng_state
from stepdbg.agent.step.step_model import StepModel


@contextlib.contextmanager
def preserved_state(model: StepModel) -> Iterator[None]:
    """Put the RNG and train/eval modes of the step's model back as they are now. The
    model's buffers are never written: stepdbg's forwards run on copies (run_root)."""
    root = model.root()
    modes = [(m, m.training) for m in root.modules()] if root is not None else []
    rng = _rng_state()
    busy = model.busy
    model.busy = True
    try:
        yield
    finally:
        model.busy = busy
        set_rng_state(rng)
        for m, training in modes:
            m.training = training


_WRAPPERS = {"OptimizedModule": "_orig_mod", "DistributedDataParallel": "module", "DataParallel": "module"}


def eager_root(model: StepModel) -> torch.nn.Module | None:
    """The captured step's model as stepdbg runs it again, on this rank alone: out of
    torch.compile's wrapper (which runs a graph where no hook or TorchFunctionMode sees an
    op) and out of DDP's (whose forward broadcasts buffers to ranks that are not
    listening, a hang, and readies its reducer for a backward that never comes)."""
    root = model.root()
    return unwrapped(root) if root is not None else None


def unwrapped(root: torch.nn.Module) -> torch.nn.Module:
    """`root` out of torch.compile's and DDP's wrappers (eager_root's reasons)."""
    while type(root).__name__ in _WRAPPERS:
        root = getattr(root, _WRAPPERS[type(root).__name__])
    return root


def run_root(root: torch.nn.Module, cap: dict[str, Any], buffers: bool = True) -> Any:
    """The root module's forward on the captured step's inputs, under the kernel choice
    its forward ran with (kernel_choice), on copies of the buffers (with `buffers`: those
    the step started with). Writing the real ones, as BatchNorm's running stats are
    written in training, would change the job's state and bump versions that the real
    backward still checks."""
    copies = {n: b.detach().clone() for n, b in root.named_buffers()}
    if buffers:
        for n, b in (cap.get("buffers") or {}).items():  # named as the captured root names them
            n = n if n in copies else _unwrapped(n)
            if n in copies:
                copies[n] = b.detach().clone()
    with kernel_choice.applied(cap.get("kernels")):
        return torch.func.functional_call(root, copies, tuple(cap["args"]), cap.get("kwargs", {}), strict=False)


def _unwrapped(name: str) -> str:
    """A buffer's name inside a compiled or DDP wrapper, as the module inside names it."""
    for prefix in ("_orig_mod.", "module."):
        name = name.removeprefix(prefix)
    return name


def restore_step_start(cap: dict[str, Any]) -> None:
    """The RNG as the captured step started (parameters have not moved before its
    optimizer step; its buffers go to run_root)."""
    set_rng_state(cap["rng"])


def shown_origin(origin: dict[str, Any] | None) -> dict[str, Any] | None:
    """An origin as the report shows it: where, module, module_type, op, file, line, code."""
    if origin is None:
        return None
    out = {k: v for k, v in origin.items() if k != "intended"}
    for key in ("module", "module_type", "op"):
        out.setdefault(key, None)
    return out


def forward_error(e: Exception, root: torch.nn.Module) -> str:
    """What the replay's own forward raised, in words."""
    if isinstance(e, NotImplementedError) and hasattr(root, "training_step"):  # a LightningModule, no forward
        return (f"{type(root).__name__} has no forward of its own: Lightning's DDP or FSDP strategy ran its "
                "training_step as the wrapper's forward, which a replay cannot run again")
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
