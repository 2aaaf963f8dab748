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

GRAD_OUTPUTS = tensors.MAX_OUTPUTS  # a model's tensor outputs whose gradient is watched ((features, logits), aux)
WALK_CAP = 200_000  # autograd nodes walked to tell whether one output is made of another


def keep_output_grad(cap: dict[str, Any], output: Any) -> None:
    """The gradient that reaches the model's `output` in the backward, kept in `cap` (the
    capture) for the replay's backward: one output-sized tensor. A model that returns
    several tensors ((features, logits), (logits, aux)) has each one's kept in
    `outputs_reached` ({index: (gradient, node, output_nr)}), and `settle` picks the one the
    replay starts from. Only this forward's: the hooks of an earlier forward (a GAN's netG,
    whose output netD's backward reaches after the capture moved to netD; a micro-batch
    before the last) are removed and write nothing, and a leaf output (a parameter the model
    returns every step) holds one hook, not one a step."""
    old = cap.pop("grad_hook", None)
    if old is not None:
        for handle in old[1]:
            handle.remove()
    # (until this forward's backward: another forward's is not its gradient)
    cap["grad_output"] = cap["output_node"] = cap["grad_output_at"] = None
    cap["outputs_reached"], cap["outputs_direct"] = {}, []
    token, handles = object(), []
    outs = (output,) if isinstance(output, torch.Tensor) else tensors.tensors_in(output)  # (one: no generator)
    for i, out in enumerate(outs):
        if i >= tensors.MAX_OUTPUTS or len(handles) >= GRAD_OUTPUTS:
            break
        if out.requires_grad:
            handles.append(own_id(_watch(cap, token, i, out)))
    cap["outputs_watched"] = len(handles)
    if handles:
        cap["grad_hook"] = (token, handles)


def _watch(cap: dict[str, Any], token: object, i: int, out: torch.Tensor) -> Any:
    """The hook that keeps output `i`'s gradient: one Python call in the backward (the
    prehook's body inline), where every call costs a microsecond or more."""
    node, nr = out.grad_fn, out.output_nr

    def keep_grads(grads: tuple[torch.Tensor | None, ...]) -> None:
        g = grads[nr] if nr < len(grads) else None
        held, reached = cap.get("grad_hook"), cap["outputs_reached"]
        if g is None or held is None or held[0] is not token or i in reached:  # (another forward's; a backward run twice: once)
            return
        reached[i] = (g.detach(), node, nr)
        if len(reached) == 1:  # (the first output's, a returned parameter's too: settle chooses among several)
            cap["grad_output"], cap["grad_output_at"], cap["output_node"] = g.detach(), i, node

    if node is None:  # (a leaf: the model returned a parameter; its gradient as a node's first)
        return out.register_hook(lambda g: keep_grads((g,)))
    # On the node that made the output (the same gradient, after the program's own tensor
    # hooks), removed when the next forward is captured. Measured (toy step of 0.35 ms,
    # per-step CPU time, p10): of the 34 us arming costs, registering on the step's new node
    # and removing it is 15-20 us with any body (a C callable's too, a tensor hook's too: torch's
    # per-node hook dict and the backward's taking the GIL for it), the same outside a session.
    return node.register_prehook(keep_grads)


def settle(cap: dict[str, Any]) -> None:
    """Of several outputs that got a gradient, the one the replay's backward starts from:
    among those the loss's graph reaches directly (not through another output: of
    (features, logits) with the loss on the logits, logits), one that is not made of
    another of them and is not a parameter, the first. Two reached directly (an aux loss
    beside the main one) are named in `outputs_direct`: the replay then runs one's part
    of the backward only. Called where the capture is read (a replay, a bundle)."""
    reached = cap.get("outputs_reached") or {}
    if len(reached) < 2:
        return
    edges = {(id(node), nr): i for i, (_, node, nr) in reached.items() if node is not None}
    loss = cap.get("loss")
    direct = set(edges.values())
    if isinstance(loss, torch.Tensor) and (id(loss.grad_fn), loss.output_nr) in edges:
        direct = {edges[(id(loss.grad_fn), loss.output_nr)]}  # (the model returned its loss: HF with labels)
    elif isinstance(loss, torch.Tensor) and loss.grad_fn is not None:
        direct = set()
        for n in _walk(loss.grad_fn, {key[0] for key in edges}):
            direct.update(edges[(id(fn), k)] for fn, k in n.next_functions if (id(fn), k) in edges)
    below = {i: {id(n) for n in _walk(reached[i][1], set())[1:]} for i in direct}  # (the nodes it is made of)
    tops = sorted(i for i in direct if not any(j != i and id(reached[i][1]) in below[j] for j in direct))
    # one whose gradient the loss made non-finite first: the replay then says the value was born in the loss
    tops.sort(key=lambda i: bool(torch.isfinite(reached[i][0]).all()))
    chosen = tops[0] if tops else min(direct) if direct else None
    cap["outputs_direct"] = sorted(direct)
    if chosen is not None:
        g, node, _ = reached[chosen]
        cap["grad_output"], cap["grad_output_at"], cap["output_node"] = g, chosen, node


def _walk(root: Any, stop: set[int]) -> list[Any]:
    """The autograd nodes reachable from `root`, not past `stop` (at most WALK_CAP)."""
    seen, out, todo = set(), [], [root]
    while todo and len(out) < WALK_CAP:
        n = todo.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        out.append(n)
        if id(n) not in stop:
            todo.extend(fn for fn, _ in n.next_functions)
    return out


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
