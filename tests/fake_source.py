"""A source for the TUI's tests: canned answers from the row-1 demo (paused at step 30),
by op name, over the client's own op methods (``stepdbg.client.connection.Ops``, generated
from the op table in wire/ops.py). An op the table gains needs an answer here, or the
fake says so; every call is recorded as (op, its arguments in the table's order).
"""

from __future__ import annotations

import asyncio
import copy
from collections import deque
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace
from typing import Any

from stepdbg.client.connection import ClientError, Ops
from stepdbg.wire.ops import OPS, SCHEMAS
from stepdbg.wire.schema import SchemaError, check_args

DEMO_FILE = "/work/demos/nan_log.py"

# What demos/nan_log.py's break at step 30 counts, with --record-memory (a real run's census).
MEMORY = {
  "by_category": {"parameters": 1284, "gradients": 0, "optimizer_state": 2584, "batch": 2048, "activations": 10752, "other_tensors": 256, "stepdbg": 5056},
  "counted": 21980, "holders": [{"name": "head.1", "bytes": 8192, "tensors": 1}, {"name": "head.0", "bytes": 2048, "tensors": 1}, {"name": "loss (its autograd graph)", "bytes": 512, "tensors": 2}, {"name": "loss", "bytes": 256, "tensors": 1}],
  "largest": [
    {"name": "saved by head.1", "category": "activations", "bytes": 8192, "shape": [64, 32], "dtype": "float32", "device": "cpu"},
    {"name": "replay capture: rng['cpu']", "category": "stepdbg", "bytes": 5056, "shape": [5056], "dtype": "uint8", "device": "cpu"},
    {"name": "x", "category": "batch", "bytes": 2048, "shape": [64, 8], "dtype": "float32", "device": "cpu"},
    {"name": "saved by head.0", "category": "activations", "bytes": 2048, "shape": [64, 8], "dtype": "float32", "device": "cpu"},
    {"name": "head.0.weight", "category": "parameters", "bytes": 1024, "shape": [32, 8], "dtype": "float32", "device": "cpu"},
    {"name": "opt.state[head.0.weight].exp_avg", "category": "optimizer_state", "bytes": 1024, "shape": [32, 8], "dtype": "float32", "device": "cpu"},
    {"name": "opt.state[head.0.weight].exp_avg_sq", "category": "optimizer_state", "bytes": 1024, "shape": [32, 8], "dtype": "float32", "device": "cpu"},
    {"name": "MseLossBackward0 in loss's graph", "category": "activations", "bytes": 256, "shape": [64, 1], "dtype": "float32", "device": "cpu"},
    {"name": "MseLossBackward0 in loss's graph (2)", "category": "activations", "bytes": 256, "shape": [64, 1], "dtype": "float32", "device": "cpu"},
    {"name": "loss", "category": "other_tensors", "bytes": 256, "shape": [], "dtype": "float32", "device": "cpu"},
  ],
}

BREAK = {
    "step": 30, "phase": "before_backward", "condition": "nan",
    "reason": "loss is nan; the model output is already non-finite: it was born in the forward",
    "scalars": {"loss": "nan", "grad_norm": None, "data_wait": 0.0002, "lr": [0.01]},
    "where": {"file": DEMO_FILE, "line": 52, "function": "main", "code": "loss.backward()"},
    "details": {"model_output": "nonfinite"},
}

REPLAY = {
    "step": 30, "phase": "before_backward", "seconds": 0.0046,
    "first_nonfinite": {"where": "forward", "module": "features", "module_type": "LogFeatures", "op": "log",
                        "file": DEMO_FILE, "line": 20, "function": "forward",
                        "code": "return torch.log(x)  # @nan-here"},
    "summary": f"log in features (LogFeatures) produced the first non-finite value (forward), at {DEMO_FILE}:20",
    "advice": {"cause": "domain", "text": "log met a value outside its domain: clamp its input to a small positive "
                                          "minimum (x.clamp_min(1e-12)), or use log_softmax / log1p"},
}

DIFF = {
    "step": 30, "checked": True, "runs": 4, "moved": ["numpy"], "fingerprints": 12,
    "first_divergence": {"step": 30, "phase": "forward", "module": "features", "class": "LogFeatures", "call": 0,
                         "what": "output", "file": DEMO_FILE, "line": 51, "max_abs": 0.002,
                         "op": {"name": "add", "file": DEMO_FILE, "line": 21, "code": "x = x + noise",
                                "same_inputs": False}},
    "randomness": [{"source": "numpy", "call": "numpy's global RNG (np.random.*)", "file": DEMO_FILE, "line": 21}],
    "summary": "step 30 run twice from the same state differs first in module features (LogFeatures), output: "
               f"add at {DEMO_FILE}:21 (max |A-B| 0.002); randomness: numpy: numpy's global RNG (np.random.*) "
               f"at {DEMO_FILE}:21",
}

SOURCE_LINES = [
    (48, "    for step in range(args.steps):"),
    (49, "        x, y = get_batch(step, args.bad_step, g)"),
    (50, "        loss = nn.functional.mse_loss(model(x), y)"),
    (51, ""),
    (52, "        loss.backward()"),
    (53, "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"),
    (54, "        opt.step()"),
]

MODULES = [
    {"name": "(root)", "type": "Net", "depth": 0, "params": 321, "trainable": 321, "training": True,
     "output_shape": [64, 1], "weight_norm": None, "grad_norm": None},
    {"name": "features", "type": "LogFeatures", "depth": 1, "params": 0, "trainable": 0, "training": True,
     "output_shape": [64, 8], "weight_norm": None, "grad_norm": None},
    {"name": "head", "type": "Sequential", "depth": 1, "params": 321, "trainable": 321, "training": True,
     "output_shape": [64, 1], "weight_norm": None, "grad_norm": None},
    {"name": "head.0", "type": "Linear", "depth": 2, "params": 288, "trainable": 288, "training": True,
     "output_shape": [64, 32], "weight_norm": 4.3, "grad_norm": "nan"},
    {"name": "head.1", "type": "ReLU", "depth": 2, "params": 0, "trainable": 0, "training": False,
     "output_shape": [64, 32], "weight_norm": None, "grad_norm": None},
    {"name": "head.2", "type": "Linear", "depth": 2, "params": 33, "trainable": 33, "training": True,
     "output_shape": [64, 1], "weight_norm": 1.19, "grad_norm": 2.1e-9},
]

SUMMARY = {
    "name": "x", "type": "Tensor", "shape": [64, 8], "dtype": "float32", "device": "cpu", "requires_grad": False,
    "numel": 512, "nan": 0, "inf": 0, "zeros": 1, "min": 0.0, "max": 1.049, "mean": 0.548, "std": 0.29,
    "norm": 14.1, "hist": {"lo": 0.0, "hi": 1.049, "counts": [3, 20, 27, 25, 30, 26, 28, 24, 27, 29, 25, 27, 26,
                                                              24, 28, 27, 26, 25, 24, 21]},
}

OPTIMIZER = [{
    "type": "AdamW",
    "groups": [{"index": 0, "params": 4, "pinned_lr": None, "lr": 0.01, "betas": [0.9, 0.999], "eps": 1e-08,
                "weight_decay": 0.01, "amsgrad": False}],
    "state": {"exp_avg": {"tensors": 4, "norm": 0.31, "max_abs": 0.05},
              "exp_avg_sq": {"tensors": 4, "norm": 0.002, "max_abs": 0.0004}},
    "schedulers": [],
}]

HISTORY = [
    {"step": i, "loss": round(48.0 * (0.88 ** i) + 0.5, 4), "grad_norm": round(12.0 * (0.93 ** i) + 0.3 + (10.0 ** (i - 23) if i > 24 else 0), 4),
     "lr": [0.01], "data_wait": 0.0002 + 0.0001 * (i % 3), "step_time": 0.0021 + 0.0002 * (i % 4),
     "mem": 300_000_000 + 1_000_000 * i, "skipped": False, "skipped_by_scaler": False}
    for i in range(30)
]

STACKS = [
    {"id": 1, "name": "MainThread", "daemon": False, "main": True, "own": False, "stack": [
        {"file": DEMO_FILE, "line": 67, "function": "<module>", "code": "main()"},
        {"file": DEMO_FILE, "line": 52, "function": "main", "code": "loss.backward()"}]},
    {"id": 2, "name": "stepdbg-server", "daemon": True, "main": False, "own": True, "stack": []},
]

LOCALS = [
    {"name": "args", "type": "Namespace", "value": "Namespace(steps=60, bad_step=30, lr=0.01)"},
    {"name": "g", "type": "Generator", "value": "<torch._C.Generator object at 0x7f3a2c1d9e30>"},
    {"name": "model", "type": "Net", "value": "321 parameters"},
    {"name": "opt", "type": "AdamW", "value": "AdamW (...)"},
    {"name": "step", "type": "int", "value": "30"},
    {"name": "x", "type": "Tensor", "value": "float32 [64, 8] on cpu"},
    {"name": "y", "type": "Tensor", "value": "float32 [64, 1] on cpu"},
    {"name": "loss", "type": "Tensor", "value": "float32 [] on cpu"},
]


class FakeSource(Ops):
    """The row-1 demo's job, paused at step 30 (or running); records every call."""

    def __init__(self, paused: bool = True) -> None:
        self.session = {"id": "4242", "pid": 4242, "host": "node17", "argv": ["python", "demos/nan_log.py"],
                        "address": "/run/stepdbg/4242.sock", "started": 1000.0, "rank": None, "world_size": None}
        self.paused: dict[str, Any] | None = copy.deepcopy(BREAK) if paused else None
        self.status_at_attach = {"pid": 4242, "step": 30, "phase": "before_backward",
                                 "state": "paused" if paused else "running", "paused": self.paused}
        self.exited: dict[str, Any] | None = None
        self.output_tail: deque[str] = deque(maxlen=20)
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.snapshots = [{"step": 20, "bytes": 1_204_224, "tried": False}, {"step": 25, "bytes": 1_204_224, "tried": False}]
        self.breaks = [{"spec": "nan", "kind": "nan", "phase": "before_backward, before_optimizer_step", "enabled": True},
                       {"spec": "grad_norm>100", "kind": "grad_norm", "phase": "before_optimizer_step", "enabled": True}]
        self.replay_delay = 0.0
        self.frame = 1  # the selected frame of STACKS[0] (u and d move it)
        self.evaluating: asyncio.Event | None = None  # an endless eval runs until interrupted

    def push(self, event: str, data: Any = None) -> None:
        """The job pushes an event (tracked as a client tracks it)."""
        self._track(event, data)
        self.events.put_nowait({"type": "event", "event": event, "data": data})

    async def iter_events(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            yield await self.events.get()

    async def call(self, op: str, timeout: float | None = 300, **args: Any) -> Any:  # type: ignore[override]
        self.calls.append((op, tuple(args.values())))
        try:  # refused as the agent refuses it
            args = check_args(op, SCHEMAS[op], args)
        except SchemaError as e:
            raise ClientError("bad_args", str(e)) from None
        answer = ANSWERS.get(op)
        if answer is None:
            raise ClientError("unknown_op", f"the fake source has no answer for op {op!r} ({OPS[op].doc})")
        result = answer(self, **args)
        return copy.deepcopy(await result if asyncio.iscoroutine(result) else result)

    async def close(self, then: str = "stay") -> None:
        self.calls.append(("close", (then,)))


def _status(src: FakeSource) -> dict[str, Any]:
    return {**src.status_at_attach, "paused": src.paused, "state": "paused" if src.paused else "running"}


async def _replay(src: FakeSource) -> dict[str, Any]:
    await asyncio.sleep(src.replay_delay)
    return REPLAY


def _set_lr(src: FakeSource, lr: float, group: int | None, pin: bool) -> dict[str, Any]:
    return {"what": "lr", "lr": lr, "pinned": pin, "groups": [{"group": 0, "old": 0.01, "new": lr}]}


def _rewind(src: FakeSource, step: int | None) -> dict[str, Any]:
    if not src.snapshots:
        raise ClientError("bad_args", "no snapshots are kept: start with --keep-every N (or watch(keep_every=N))")
    to_step = step or src.snapshots[-1]["step"]
    return {"what": "rewind", "step": 30, "to_step": to_step, "batches_skipped": 30 - to_step + 1}


def _memory(src: FakeSource) -> dict[str, Any]:
    return {"host_rss": 331_000_000, "cuda": [], "snapshots": src.snapshots, "keep_every": 5,
            "keep": 2, "step": 30, "now": 331_000_000, "record_memory": True, **MEMORY}


def _source(src: FakeSource, context: int) -> dict[str, Any]:
    if src.frame == 0:
        return {"file": DEMO_FILE, "line": 67, "function": "<module>", "lines": [
            {"line": 65, "text": ""}, {"line": 66, "text": 'if __name__ == "__main__":'},
            {"line": 67, "text": "    main()"}]}
    return {"file": DEMO_FILE, "line": 52, "function": "main",
            "lines": [{"line": n, "text": t} for n, t in SOURCE_LINES]}


def _frames(src: FakeSource, move: int) -> list[dict[str, Any]]:
    src.frame = min(max(src.frame - move, 0), 1)
    return [{**f, "selected": i == src.frame} for i, f in enumerate(STACKS[0]["stack"])]


def _locals(src: FakeSource, **everything: bool) -> list[dict[str, str]]:
    return LOCALS if src.frame == 1 else [{"name": "main", "type": "function",
                                           "value": "<function main at 0x7f3a2c2e1b20>"}]


async def _eval(src: FakeSource, source: str) -> dict[str, Any]:
    if source == "sorted(vars())":
        return {"output": "", "value": "['args', 'g', 'loss', 'model', 'opt', 'step', 'x', 'y']", "error": None}
    if source.startswith("raise"):
        return {"output": "", "value": None, "error": "Traceback (most recent call last):\nValueError: boom\n"}
    if source.startswith("while True"):  # runs until interrupted, as in the job
        src.evaluating = asyncio.Event()
        await src.evaluating.wait()
        return {"output": "", "value": None, "error": "KeyboardInterrupt: interrupted from the front end\n"}
    return {"output": "", "value": "tensor(nan, grad_fn=<MseLossBackward0>)", "error": None}


def _interrupt(src: FakeSource) -> dict[str, Any]:
    if src.evaluating is not None:
        src.evaluating.set()
    return {"interrupted": src.evaluating is not None}


def _break_add(src: FakeSource, spec: str) -> list[str]:
    src.breaks.append({"spec": spec, "kind": spec.split(">")[0], "phase": "any", "enabled": True})
    return [b["spec"] for b in src.breaks]


def _break_remove(src: FakeSource, spec: str) -> list[str]:
    src.breaks = [b for b in src.breaks if b["spec"] != spec]
    return [b["spec"] for b in src.breaks]


def _break_enable(src: FakeSource, spec: str, enabled: bool) -> list[dict[str, Any]]:
    for b in src.breaks:
        if b["spec"] == spec:
            b["enabled"] = enabled
    return src.breaks


def _nothing(src: FakeSource, **args: Any) -> None:
    return None


# Each op's canned answer: a function of the fake and the op's arguments (by their wire names).
ANSWERS: dict[str, Callable[..., Any]] = {
    "status": _status, "cont": _nothing, "pause": _nothing, "next_phase": _nothing, "next_step": _nothing,
    "end": _nothing, "replay": _replay, "diff": lambda src: DIFF, "set_lr": _set_lr, "skip": lambda src: {"what": "skip", "target_step": 30},
    "rewind": _rewind, "summary": lambda src, name: {**SUMMARY, "name": name},
    "slice": lambda src, name, index, limit: [0.2153, 0.9712, 0.0, 0.5521, 0.3317, 0.8021, 0.1198, 0.6614],
    "module_tree": lambda src: MODULES, "optimizer": lambda src: OPTIMIZER, "memory": _memory,
    "history": lambda src, last: HISTORY[-last:], "source": _source, "stacks": lambda src: STACKS,
    "frames": _frames, "locals": _locals, "eval": _eval, "interrupt": _interrupt,
    "interrupt_job": lambda src: {"pid": 4242}, "breakpoints": lambda src: src.breaks,
    "break_add": _break_add, "break_remove": _break_remove, "break_enable": _break_enable,
}
assert set(ANSWERS) <= set(OPS), set(ANSWERS) - set(OPS)


class FakeJobSource(FakeSource):
    """A 4-rank job that hangs: rank 2 is stuck in its DataLoader, ranks 0 and 1 wait for
    it in the backward's all-reduce with the time their timeout leaves, rank 3 was killed.
    The rows come from the real `rank_row`, so the pictures show the words users get."""

    many_ranks = True

    def __init__(self) -> None:
        super().__init__(paused=False)
        self.session = {**self.session, "rank": 0, "world_size": 4, "job_id": "train-7f3a"}
        self.current = 0
        self.targets: list[int] | None = None
        self.clients = [SimpleNamespace(exited=None, output_tail=[], session={}) for _ in range(3)] + [
            SimpleNamespace(exited={"exit_code": None, "lost": "closed"}, output_tail=["step 1811 loss 2.318"],
                            session={"pid": 5003, "local_rank": 3})]

    def switch(self, rank: int) -> None:
        self.current = rank % len(self.clients)

    async def rank_table(self) -> list[dict[str, Any]]:
        from stepdbg.client.job import TorchrunLog, rank_row

        where = {"file": "/work/train.py", "line": 88, "function": "main", "code": "loss.backward()",
                 "inner": "_engine_run_backward (graph.py:829)"}
        waiting = {**where, "idle_s": 250.0, "collective": "backward (DDP's all-reduce)",
                   "timeout_s": 600.0, "left_s": 350.0}
        stalled = {**where, "line": 61, "code": "for batch in loader:", "idle_s": 252.0, "collective": None,
                   "inner": "_poll (connection.py:440)"}
        log = TorchrunLog()
        log.feed("E1122 api.py:1002] failed (exitcode: -9) local_rank: 3 (pid: 5003) of binary: python")
        statuses = [{"state": "running", "step": 1812, "phase": "before_backward", "waiting": waiting},
                    {"state": "running", "step": 1812, "phase": "before_backward", "waiting": waiting},
                    {"state": "running", "step": 1812, "phase": "before_forward", "waiting": stalled}, None]
        last = {"loss": 2.318, "grad_norm": 0.91}
        return [rank_row(r, c, st, last if st else None, log)
                for r, (c, st) in enumerate(zip(self.clients, statuses, strict=True))]
