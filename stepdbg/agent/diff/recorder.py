"""The fingerprint recorder of `stepdbg diff`: what one run writes for the comparison.

``Recorder.attach(session, path, steps, max_calls)`` puts a ``ListenerTap`` between the
step model and its listener (the Session): the tap tells the recorder what the step
model tells the Session, then hands it on unchanged. With two global module hooks (for
the first `steps` steps only) the recorder writes, for each step, in the order things
happen (the record format is stepdbg/wire/step_diff.py's):

- ``input``: the batch (the model's first call's arguments) and every parameter and
  buffer of the model(s), at the step's first forward;
- ``forward``: each call of a module of the model: its tensor arguments (``input[i]``)
  and its outputs (``output[i]``), with its qualified name from the root, its call
  index in the step, the line that called it and the line its forward is defined on;
  at most `max_calls` calls a step (the step line says how many were left out);
- ``loss``: what ``backward`` was called on;
- ``backward``: the gradients as the optimizer sees them (after clipping);
- ``optimizer``: the parameters and the optimizer's state after its update;
- the step line's ``randomness``: what the step drew from randomness torch's seed does not
  fix (Python's ``random``, numpy, a generator the model holds, OS entropy), by module call
  (randomness.StepDraws: a profiler on the step's thread while it runs).

A step is written (JSON lines, flushed) when it ends, so a crash leaves whole steps
only. Everything here reads tensors (fingerprint.py); nothing draws a random number or
changes a value the job computes. In a forked child (a DataLoader worker) it is idle.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import torch

from stepdbg.agent.diff.calls import CallLog
from stepdbg.agent.diff.randomness import StepDraws
from stepdbg.wire.step_diff import FORMAT_VERSION  # (the reader's: one place)


class ListenerTap:
    """The step model's listener: the recorder hears each event, then the Session does."""

    def __init__(self, inner: Any, recorder: Recorder) -> None:
        self._inner, self._rec = inner, recorder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def on_batch(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        self._rec.guarded(self._rec.on_batch, module, args)
        self._inner.on_batch(module, args)

    def on_loss(self, loss: torch.Tensor | None) -> None:
        self._rec.guarded(self._rec.on_loss, loss)
        self._inner.on_loss(loss)

    def before_update(self, opt: torch.optim.Optimizer) -> None:
        self._rec.guarded(self._rec.before_update, opt)
        self._inner.before_update(opt)

    def after_update(self, opt: torch.optim.Optimizer) -> None:
        self._inner.after_update(opt)
        self._rec.guarded(self._rec.after_update, opt)

    def on_step_end(self, record: dict[str, Any]) -> None:
        self._rec.guarded(self._rec.on_step_end, record)
        self._inner.on_step_end(record)  # (stop_after ends the run here)


class Recorder:
    """Fingerprints of the first `steps` steps, written to `path` (created 0600)."""

    def __init__(self, model: Any, path: str, steps: int, max_calls: int) -> None:
        self.model = model
        self.steps, self.max_calls = steps, max_calls
        self.pid = os.getpid()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self.file: Any = os.fdopen(fd, "w", encoding="utf-8")
        self._write({"kind": "header", "version": FORMAT_VERSION, "steps": steps, "max_calls": max_calls})
        self.log = CallLog(max_calls, self._name_of)  # the step's entries
        self.open = False  # between a step's first forward and its end
        self.step = 0
        self.updated = False
        self._names: dict[int, tuple[str, torch.nn.Module]] = {}
        self._roots_named: list[int] = []
        self._roots_recorded: set[int] = set()  # roots whose parameters and buffers the step holds
        self._hooks: list[Any] = []
        self.error: str | None = None
        self.drawn: StepDraws | None = None  # the step's randomness, from its first forward to its end

    @classmethod
    def attach(cls, session: Any, path: str, steps: int, max_calls: int) -> Recorder:  # (AgentConfig.fingerprint)
        """A recorder on `session`'s step model (before or after session.start())."""
        rec = cls(session.model, path, steps, max_calls)
        session.model.listener = ListenerTap(session.model.listener, rec)
        session.on_stop.append(rec.close)
        return rec

    def _hook(self) -> None:
        """The module hooks, put in at the first step's first forward: after the step
        model's own, whose pre-hook makes a root of a model first called later in the step
        (a head called after its encoder), so ours finds it named, with its arguments."""
        from torch.nn.modules import module as nn_module

        self._hooks = [nn_module.register_module_forward_pre_hook(self._pre),
                       nn_module.register_module_forward_hook(self._post)]

    # ------------------------------------------------------------------ the step's events

    def guarded(self, fn: Any, *args: Any) -> None:
        """Run one of the recorder's handlers; a failure is kept (written at the end), and
        the job goes on as if the recorder were not there."""
        if self.file is None or os.getpid() != self.pid or self.error is not None:
            return
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - the job must not fail for the recorder
            self.error = f"{type(e).__name__}: {e}"

    def on_batch(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        st = self.model.current
        self.step = st.index if st is not None else self.model.step
        if self.step >= self.steps:
            return
        if not self._hooks:
            self._hook()
        self.open, self.updated = True, False
        self.log.reset(self.step)
        self._name_roots()
        self.log.step_start(args, self.model.capture.get("kwargs"), self._model_tensors())
        self._roots_recorded = {id(r) for r in self.model.roots.values()}
        roots = list(self.model.roots.values())
        if self.drawn is None and roots:
            self.drawn = StepDraws(roots[0])

    def on_loss(self, loss: torch.Tensor | None) -> None:
        if self.open:
            n = sum(1 for e in self.log.entries if e["phase"] == "loss")
            self.log.add("loss", "", "loss", n, loss)

    def before_update(self, opt: torch.optim.Optimizer) -> None:
        if self.open:
            self._grads(self._opt_params(opt))
            self.updated = True

    def after_update(self, opt: torch.optim.Optimizer) -> None:
        if not self.open:
            return
        names = self._param_names()
        for i, p in enumerate(self._opt_params(opt)):
            owner, _, leaf = names.get(id(p), f"param_groups.param{i}").rpartition(".")
            self.log.add("optimizer", owner, leaf, 0, p)
            state = opt.state.get(p) or {}
            for key in sorted(k for k in state if isinstance(k, str)):
                if isinstance(state[key], torch.Tensor):
                    self.log.add("optimizer", owner, f"{leaf}.{key}", 0, state[key])

    def on_step_end(self, record: dict[str, Any]) -> None:
        if not self.open:
            return
        if not self.updated:  # no optimizer object (a manual update): the gradients as they are now
            self._grads(self.model.model_params())
        self.open = False
        for e in self.log.entries:
            self._write(e)
        drawn, self.drawn = self.drawn, None
        self._write({"kind": "step", "step": self.step, "calls": self.log.calls, "capped": self.log.capped,
                     "loss": record.get("loss"), **({"randomness": drawn.finish()} if drawn is not None else {})})
        self.log.reset(self.step)
        if self.step + 1 >= self.steps:
            self.close()

    def close(self) -> None:
        """Write the end line, close the file and remove the hooks (idempotent)."""
        for h in self._hooks:
            h.remove()
        self._hooks = []
        if self.drawn is not None:  # (a step that did not end: its profiler goes)
            self.drawn.draws.stop()
            self.drawn = None
        if self.file is not None and os.getpid() == self.pid:
            self._write({"kind": "end", "error": self.error})
            self.file.close()
        self.file = None

    # ------------------------------------------------------------------ module calls

    def _pre(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        if self._records(module):
            if len(self._roots_recorded) != len(self.model.roots):
                self.guarded(self._later_roots)
            n = len(self.log.entries)
            if self.drawn is not None and self._name_of(module) is not None:
                self.guarded(self.drawn.enter)
            self.guarded(self.log.call_input, module, args)
            if id(module) in self._roots_recorded:  # a later model's arguments: made by the step's own code
                for e in self.log.entries[n:]:
                    e["root"] = True

    def _post(self, module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        if self._records(module):
            name = self._name_of(module)
            if self.drawn is not None and name is not None:
                self.guarded(self.drawn.leave, name)
            self.guarded(self.log.call_output, module, output)

    def _records(self, module: torch.nn.Module) -> bool:
        if not self.open or torch.compiler.is_compiling():
            return False
        thread = self.model.thread
        return thread is None or thread == threading.get_ident()

    # ------------------------------------------------------------------ helpers

    def _name_of(self, module: torch.nn.Module) -> str | None:
        known = self._names.get(id(module))
        if known is None and len(self.model.roots) != len(self._roots_named):
            self._name_roots()
            known = self._names.get(id(module))
        return known[0] if known is not None and known[1] is module else None

    def _name_roots(self) -> None:
        """Qualified names of every module of the roots seen so far: the first root's as
        they are, a later root's after its class name (a GAN's discriminator)."""
        for root in list(self.model.roots.values()):
            if id(root) in self._roots_named:
                continue
            prefix = f"{type(root).__name__}:" if self._roots_named else ""
            self._roots_named.append(id(root))
            for name, m in root.named_modules():
                self._names.setdefault(id(m), (prefix + name if name else prefix.rstrip(":"), m))

    def _model_tensors(self, skip: set[int] | None = None) -> list[tuple[str, torch.Tensor]]:
        """(name, tensor) of the roots' parameters and buffers, but those of the roots in `skip`."""
        out: dict[str, torch.Tensor] = {}
        for k, root in enumerate(list(self.model.roots.values())):
            prefix = f"{type(root).__name__}:" if k else ""
            for n, t in [*root.named_parameters(), *root.named_buffers()]:
                if skip is None or id(root) not in skip:
                    out.setdefault(prefix + n, t)
        return list(out.items())

    def _later_roots(self) -> None:
        """A model first called after the step's first forward (in the first step, before
        the roots are known): its parameters and buffers as the step's input, recorded
        now, before its first call (nothing has updated them yet)."""
        self._name_roots()
        for name, t in self._model_tensors(skip=self._roots_recorded):
            owner, _, leaf = name.rpartition(".")
            self.log.add("input", owner, leaf, 0, t)
        self._roots_recorded = {id(r) for r in self.model.roots.values()}

    def _opt_params(self, opt: torch.optim.Optimizer) -> list[torch.Tensor]:
        return [p for g in opt.param_groups for p in g["params"]]

    def _param_names(self) -> dict[int, str]:
        """Each parameter's name as the forward's modules are named here (_name_roots): one
        model is named one way in the whole record (the program's own names, the models'
        variables, would call the first root's Linear `fc` in the forward and `encoder.fc`
        in the gradients)."""
        names: dict[int, str] = {}
        for name, t in self._model_tensors():
            names.setdefault(id(t), name)
        return names

    def _grads(self, params: list[torch.Tensor]) -> None:
        names = self._param_names()
        for i, p in enumerate(params):
            owner, _, leaf = names.get(id(p), f"param_groups.param{i}").rpartition(".")
            self.log.add("backward", owner, f"{leaf}.grad", 0, p.grad)

    def _write(self, obj: dict[str, Any]) -> None:
        self.file.write(json.dumps(obj) + "\n")
        if obj.get("kind") in ("header", "step", "end"):
            self.file.flush()

