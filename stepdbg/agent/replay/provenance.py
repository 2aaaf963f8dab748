"""Provenance: which op *produced* a non-finite value, not which ones passed it on.

The rules (docs/replay.md, "Replay"):

- a NaN's producer is the first op that makes a NaN from NaN-free inputs, unless the
  inputs carried an unintended inf, whose producer it then is (log(0) = -inf, then a
  Linear turns it into NaN: the log is the producer);
- an inf's producer is the first op whose inf reaches the model output. An inf written on
  purpose (a ``masked_fill(mask, -inf)``, ``torch.full(..., -inf)`` as in
  ``generate_square_subsequent_mask``) is intended: when softmax absorbs it nothing is
  reported, and the op that turns it into NaN (softmax over an all-masked row) is the
  producer;
- where an op's inputs carry values from several producers, the one that ran first is
  named (the encoder's, before the decoder's);
- a value already non-finite in a parameter or an input has no producer in the replay:
  it is reported as that tensor.

``Provenance`` is a TorchFunctionMode active during the replayed forward: every op's
outputs are checked once (one fused ``isfinite`` per output, and ``isnan`` only when that
fails), and each non-finite output carries the index of its origin, so what reaches the
output names its producer. It also records which module instance ran the op that made
each autograd node, so the backward is attributed to ``h.3.attn``, not to the first block
with the same source line.
"""

from __future__ import annotations

import math
import sys
import weakref
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from stepdbg.agent.measure.frames import site_where, user_frame, where_of
from stepdbg.agent.measure.tensors import all_finite, readable, tensors_in
from stepdbg.agent.step.hooks import own_id

NAN, INF = 1, 2


def flags_of(t: torch.Tensor) -> int:
    """NAN | INF bits of a tensor (0 when finite, not floating, or not readable here)."""
    if not readable(t) or all_finite(t):
        return 0
    with torch.no_grad():
        d = t.detach()
        nan = bool(torch.isnan(d).any())
        inf = bool(torch.isinf(d).any())
    return (NAN if nan else 0) | (INF if inf else 0)


def named_tensors(x: Any, name: str, depth: int = 0) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) for every tensor in a batch-like structure: batch[0], batch['labels']."""
    if isinstance(x, torch.Tensor):
        yield name, x
    elif depth < 4 and isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from named_tensors(v, f"{name}[{i}]", depth + 1)
    elif depth < 4 and isinstance(x, dict):
        for k, v in x.items():
            yield from named_tensors(v, f"{name}[{k!r}]", depth + 1)


def first_bad(named: Iterator[tuple[str, torch.Tensor]]) -> dict[str, Any] | None:
    """The first tensor holding a non-finite value: its name, the index of the first bad
    element and how many there are."""
    for name, t in named:
        if flags_of(t):
            with torch.no_grad():
                bad = ~torch.isfinite(t.detach())
                index = [int(i) for i in torch.nonzero(bad)[0].tolist()] if bad.dim() else []
                count = int(bad.sum())
            kind = "nan" if flags_of(t) & NAN else "inf"
            return {"tensor": name, "index": index, "count": count, "kind": kind, "shape": list(t.shape)}
    return None


def _explicit_inf(x: Any, depth: int = 0) -> bool:
    """An infinite Python number among an op's arguments: an inf written on purpose."""
    if isinstance(x, float):
        return math.isinf(x)
    if depth < 3 and isinstance(x, (list, tuple)):
        return any(_explicit_inf(v, depth + 1) for v in x)
    if depth < 3 and isinstance(x, dict):
        return any(_explicit_inf(v, depth + 1) for v in x.values())
    return False


class ModuleStack:
    """Which module instance is running, from forward hooks that live only during the replay."""

    def __init__(self, root: torch.nn.Module, prefix: str = "") -> None:
        """`prefix`: the model's name where the program has several (a GAN's netG, netD)."""
        self.names = {id(m): (".".join(filter(None, (prefix, n))) or type(root).__name__, type(m).__name__)
                      for n, m in root.named_modules()}
        self.root = self.names[id(root)]
        self.stack: list[torch.nn.Module] = []
        self.handles: list[Any] = []

    def __enter__(self) -> ModuleStack:
        from torch.nn.modules import module as nn_module

        self.handles = [
            own_id(nn_module.register_module_forward_pre_hook(lambda m, a: self.stack.append(m))),
            own_id(nn_module.register_module_forward_hook(lambda m, a, o: self._pop(m), always_call=True)),
        ]
        return self

    def _pop(self, m: torch.nn.Module) -> None:
        if self.stack and self.stack[-1] is m:
            self.stack.pop()

    def __exit__(self, *exc: Any) -> None:
        for h in self.handles:
            h.remove()

    def current(self) -> tuple[str, str]:
        """(name, type) of the innermost running module of the model (the root by its class)."""
        for m in reversed(self.stack):
            if id(m) in self.names:
                return self.names[id(m)]
        return self.root


class Provenance(TorchFunctionMode):
    """Tracks where each non-finite value came from during a replayed forward."""

    def __init__(self, modules: ModuleStack, names: dict[int, str],
                 called_at: tuple[Any, ...] | None = None) -> None:
        super().__init__()
        self.modules = modules
        self.names = names  # id(parameter or buffer) -> its name
        # The user's line that called the model in the step: where an op of torch's own
        # modules (an nn.Sequential of Linears) is placed, not at the paused line around the
        # replay (`loss.backward()`), which is no line of the forward.
        self.called_at = called_at
        self._outer: set[int] = set()  # the frames around the replay (ids, alive while it runs)
        self.origins: list[dict[str, Any]] = []
        self.ops = 0
        self._seen: dict[int, tuple[weakref.ref[torch.Tensor], int, int | None]] = {}
        self.node_at: dict[int, dict[str, Any]] = {}  # id(grad_fn) -> module and line of its op
        self._nodes: list[Any] = []  # keeps those nodes alive, so their ids stay theirs

    def __enter__(self) -> Provenance:
        f = sys._getframe(1)
        while f is not None:
            self._outer.add(id(f))
            f = f.f_back
        super().__enter__()
        return self

    def _where(self, frame: Any) -> dict[str, Any]:
        """File, line, function and code of an op run in `frame`, the innermost user frame."""
        if frame is None or id(frame) in self._outer:  # (a frame around the replay is no line of the forward)
            return site_where(self.called_at) if self.called_at is not None else {}
        return where_of(frame) or {}

    def state(self, t: torch.Tensor) -> tuple[int, int | None]:
        """(flags, origin index) of a tensor; one not made in the replay is looked at once."""
        seen = self._seen.get(id(t))
        if seen is not None and seen[0]() is t:
            return seen[1], seen[2]
        f = flags_of(t)
        origin = None
        if f:  # non-finite before the replay touched it: a parameter, a buffer or an input
            name = self.names.get(id(t))
            origin = self._origin({"where": "parameter" if name else "input", "tensor": name or "a tensor input",
                                   "kind": "nan" if f & NAN else "inf", "intended": False})
        self._remember(t, f, origin)
        return f, origin

    def _remember(self, t: torch.Tensor, f: int, origin: int | None) -> None:
        try:
            self._seen[id(t)] = (weakref.ref(t), f, origin)
        except TypeError:
            pass

    def _origin(self, info: dict[str, Any]) -> int:
        self.origins.append(info)
        return len(self.origins) - 1

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        inputs = [self.state(t) for t in tensors_in((args, kwargs))]  # before the op: in-place ops change them
        out = func(*args, **kwargs)
        outs = [o for o in tensors_in(out)]
        written = _written(func, args)  # an in-place write (h[0, 7] = nan) makes its target anew
        if written is not None and all(o is not written for o in outs):
            outs.append(written)
        if not outs:
            return out
        self.ops += 1
        frame = None
        module = None
        for o in outs:
            if o.grad_fn is not None and id(o.grad_fn) not in self.node_at:
                frame = frame or user_frame(sys._getframe(1))
                module = module or self.modules.current()
                self.node_at[id(o.grad_fn)] = {"module": module[0], "module_type": module[1], **self._where(frame)}
                self._nodes.append(o.grad_fn)
            f = flags_of(o)
            origin = None
            if f:
                origin = self._carried(f, inputs)
                if origin is None:
                    frame = frame or user_frame(sys._getframe(1))
                    module = module or self.modules.current()
                    origin = self._origin({
                        "where": "forward", "module": module[0], "module_type": module[1], "op": _op_name(func),
                        "node": o.grad_fn.name() if o.grad_fn is not None else None,  # the kernel's autograd node
                        "kind": "nan" if f & NAN else "inf", "dtype": str(o.dtype).removeprefix("torch."),
                        "intended": not f & NAN and _explicit_inf((args, kwargs)), **self._where(frame),
                    })
            self._remember(o, f, origin)
        return out

    def _carried(self, f: int, inputs: list[tuple[int, int | None]]) -> int | None:
        """The origin an output's non-finite values come from, when an input brought them.
        Of several, the one made first: two branches that each make a NaN (an encoder and a
        decoder) are named by the one that ran first."""
        if f & NAN:
            nan = [o for fl, o in inputs if fl & NAN and o is not None]
            if nan:
                return min(nan)
            inf = [o for fl, o in inputs  # an unintended inf that this op turned into NaN
                   if fl & INF and o is not None and not self.origins[o].get("intended")]
            return min(inf) if inf else None
        inf = [o for fl, o in inputs if fl & INF and o is not None]
        return min(inf) if inf else None

    def producer_of(self, outputs: Any) -> dict[str, Any] | None:
        """The producer of the first non-finite value in `outputs` (the model's output)."""
        for t in tensors_in(outputs):
            f, origin = self.state(t)
            if f and origin is not None:
                return self.origins[origin]
        return None


_IN_PLACE = {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__ipow__",
             "__imod__", "__imatmul__"}


def _written(func: Any, args: tuple[Any, ...]) -> torch.Tensor | None:
    """The tensor an in-place op writes into (its first argument): `h[i] = v`, `h += x`,
    `h.fill_(v)`, `h.masked_fill_(m, v)`; None for any other op."""
    name = getattr(func, "__name__", "") or ""
    in_place = name in _IN_PLACE or (name.endswith("_") and not name.endswith("__"))
    return args[0] if in_place and args and isinstance(args[0], torch.Tensor) else None


def _op_name(func: Any) -> str:
    return getattr(func, "__name__", None) or str(func)
