"""Code a person runs in the paused frame: tensor summaries, slices, expressions and
statements. Everything runs on the paused training thread (grad mode, autocast and the
current device are per thread) through ``Controls.on_training_thread``."""

from __future__ import annotations

import contextlib
import io
import traceback
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch

from . import tensors
from .controls import Controls
from .step_model import StepModel


class Evaluator:
    """Names, summaries and evaluation in the paused user frame."""

    def __init__(self, model: StepModel, controls: Controls, frame: Callable[[], FrameType | None]) -> None:
        self.model = model
        self.controls = controls
        self.frame = frame  # the paused user frame, or None

    def namespace(self) -> dict[str, Any]:
        """Names a user can inspect: the paused frame's locals plus the step's objects."""
        ns: dict[str, Any] = {}
        f = self.frame()
        if f is not None:
            ns.update(f.f_globals)
            ns.update(f.f_locals)
        cap = self.model.capture
        ns.update({
            "model": cap.get("root"), "batch": cap.get("batch"), "loss": cap.get("loss"),
            "output": cap.get("output"), "optimizer": next(iter(self.model.optimizers), None),
        })
        return ns

    def summary(self, name: str) -> dict[str, Any]:
        """Summary of the tensor named by `name` (any expression in the paused frame)."""
        return self.controls.on_training_thread(lambda: tensors.summarize(self._eval_expr(name), name))

    def slice(self, name: str, index: str = "", limit: int = 256) -> list[Any]:
        """Values of a tensor at a numpy-style index ('0, :8'), at most `limit` of them."""
        def run() -> list[Any]:
            value = self._eval_expr(name)
            if not isinstance(value, torch.Tensor):
                raise LookupError(f"{name!r} is a {type(value).__name__}, not a tensor")
            return tensors.slice_of(value, index, limit)

        return self.controls.on_training_thread(run)

    def _eval_expr(self, expr: str) -> Any:
        ns = self.namespace()
        try:
            return eval(compile(expr, "<stepdbg>", "eval"), ns, ns)
        except Exception as e:
            raise LookupError(f"cannot evaluate {expr!r}: {type(e).__name__}: {e}") from None

    def evaluate(self, source: str) -> dict[str, Any]:
        """Run an expression or statement in the paused frame; stdout and errors come back as text."""
        def run() -> dict[str, Any]:
            f = self.frame()
            g = f.f_globals if f is not None else {}
            loc = self.namespace()
            buf = io.StringIO()
            result: Any = None
            error = None
            busy, self.model.busy = self.model.busy, True
            try:
                with contextlib.redirect_stdout(buf):
                    try:
                        code = compile(source, "<stepdbg>", "eval")
                        result = eval(code, g, loc)
                    except SyntaxError:
                        exec(compile(source, "<stepdbg>", "exec"), g, loc)
            except Exception as e:
                error = _user_traceback(e)
            finally:
                self.model.busy = busy
            if f is not None:
                # Changes to locals are visible to the paused frame where Python allows it.
                for k, v in loc.items():
                    if k in f.f_locals and f.f_locals[k] is not v:
                        with contextlib.suppress(Exception):
                            f.f_locals[k] = v
            return {"output": buf.getvalue(), "value": None if result is None else tensors.short_repr(result, 2000),
                    "error": error}

        return self.controls.on_training_thread(run)


def _user_traceback(e: BaseException) -> str:
    """The traceback of an evaluated statement, from its own code on (not stepdbg's)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "<stepdbg>":
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(e), e, tb, chain=False))
