"""What an armed replay keeps of the backward: the gradient that reached the model's output
(the replay's backward starts from it) and, under gradient accumulation, the capture of the
micro-batch whose backward first made the gradients non-finite.

A NaN born in a backward alone (sqrt's at 0, whose forward is finite) leaves every loss
finite: the step sees it in the gradients, read once before the update, when the capture
holds the last micro-batch. So while replay is armed, the gradients are checked after each
micro-batch's backward (one fused norm, read: a host read, on an accelerator a sync) until
one is not finite; that micro-batch's capture (inputs, RNG state, buffers, output gradient:
what arming keeps of every micro-batch) is kept, and a break on the gradients puts it back
(``focus``), as micro_batches.focus does for a loss. Accumulated gradients that went
non-finite stay so: finite after backward k is finite after every one before it.

Not armed, nothing here runs. Armed, a step of N backwards pays N - 1 reads once the loop is
known (the previous step's count): the last one's gradients are the update's own read, and
are read before another backward only if one comes. A step of one pays none. Memory: the
kept capture holds references (what arming keeps of the micro-batch anyway), past its
micro-batch only in the step that went non-finite, or one whose shape changed.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from stepdbg.agent.measure import tensors
from stepdbg.agent.step import micro_batches
from stepdbg.agent.step.hooks import own_id


def keep_output_grad(cap: dict[str, Any], output: Any) -> None:
    """The gradient that reaches the model's `output` in the backward, kept in `cap` (the
    capture) for the replay's backward: one output-sized tensor. Only this forward's: the
    hook of an earlier forward (a GAN's netG, whose output netD's backward reaches after the
    capture moved to netD; a micro-batch before the last) is removed and writes nothing, and
    a leaf output (a parameter the model returns every step) holds one hook, not one a step."""
    old = cap.pop("grad_hook", None)
    if old is not None:
        old[1].remove()
    cap["grad_output"] = None  # (until this forward's backward: another forward's is not its gradient)
    out = tensors.first_tensor(output)
    if out is None or not out.requires_grad:
        return
    token = object()
    node, nr = out.grad_fn, out.output_nr
    if node is None:  # (a leaf: the model returned a parameter)
        def keep_grad(g: torch.Tensor) -> None:
            if _mine(cap, token):
                cap["grad_output"] = g.detach()

        cap["grad_hook"] = (token, own_id(out.register_hook(keep_grad)))
        return

    def keep_grads(grads: tuple[torch.Tensor | None, ...]) -> None:
        if _mine(cap, token):
            g = grads[nr] if nr < len(grads) else None
            cap["grad_output"] = g.detach() if g is not None else None

    # On the node that made the output (the same gradient, after the program's own tensor
    # hooks), removed when the next forward is captured. Measured on a quiet CPU (0.32 ms
    # toy step): this hook is 20-30 us of the 50 us that arming costs a step, no cheaper
    # than a tensor hook; the same hook outside a session costs 4 us.
    cap["grad_hook"] = (token, own_id(node.register_prehook(keep_grads)))


def _mine(cap: dict[str, Any], token: object) -> bool:
    held = cap.get("grad_hook")
    return held is not None and held[0] is token


class BackwardWatch:
    """The gradients' finiteness after each backward of a step, while replay is armed."""

    def __init__(self) -> None:
        self.expected: int | None = None  # backwards in the previous step (None: not known)
        self._step = -1
        self._calls = 0

    def after_backward(self, model: Any) -> None:
        """Backward number st.backward_calls of the step is done: are the gradients finite?
        Not read when it is the step's last, as the loop goes (the update reads their norm);
        its capture waits, and is read before the next backward if one comes (the loop
        changed shape: a GAN's steps alternate one backward and two)."""
        st = model.current
        if st is None:
            return
        if st.index != self._step:
            self.expected = self._calls if st.index == self._step + 1 else None
            self._step = st.index
        k = self._calls = st.backward_calls
        if st.bad_backward is not None or "before_optimizer_step" in st.phase_times:
            return  # (known already; or past the update's check: LBFGS's line search)
        if k == self.expected:
            st.unread = micro_batches.inputs_now(model)  # (references, as the capture holds them)
        else:
            self._read(model, st, k, micro_batches.inputs_now)

    def before_backward(self, model: Any) -> None:
        """Another backward comes after the one the loop's shape said was the last: its
        gradients are read now, before they change."""
        st = model.current
        if st is not None and st.unread is not None:
            kept, st.unread = st.unread, None
            self._read(model, st, st.backward_calls, lambda _: kept)

    @staticmethod
    def _read(model: Any, st: Any, k: int, capture: Any) -> None:
        """The one read: the gradients after backward `k`; a micro-batch's `capture(model)`
        kept when it is known to be the one that made them non-finite."""
        grads = [g for p in model.params_of_step() if (g := p.grad) is not None]
        if not grads or tensors.is_dtensor(grads[0]):
            return  # (a sharded gradient's norm is a collective: not read per micro-batch)
        norm = tensors.as_float(tensors.total_norm(grads))
        if norm is None or math.isfinite(norm) or all(bool(torch.isfinite(g).all()) for g in grads):
            st.finite_through = k  # (an overflowed norm of finite gradients is finite)
            return
        st.bad_backward = k
        if st.finite_through == k - 1:  # (else it is one of those since the last read: not known which)
            st.bad_capture = capture(model)


def focus(model: Any) -> str | None:
    """At a break on the gradients: the micro-batch whose backward made them non-finite gets
    the StepModel's capture (the replay and the views see it). Returns "2 of 4", or None for
    a step of one backward or when it is not known (not armed; not read after every one)."""
    st = model.current
    n = st.backward_calls if st is not None else 0
    if n < 2:
        return None
    if st.bad_backward is None:  # finite after every backward read: the last one, if all before it were read
        return f"{n} of {n}" if st.finite_through == n - 1 else None
    if st.bad_capture is None:
        return None
    if st.bad_backward < n:  # (the last one's are the capture already)
        model.capture = st.bad_capture
    return f"{st.bad_backward} of {n}"
