"""The agent's configuration: one dataclass, built once from the command line (the CLI) or
from ``stepdbg.watch()``, and read by the Session. The launcher hands it to the job in
the environment variable STEPDBG_CONFIG as JSON (``to_json`` / ``from_json``); nothing
else configures a Session.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from stepdbg.wire import address
from stepdbg.wire.conditions import ACTIONS, parse

DEFAULT_BREAKS = ("nan", "exception")
MAX_CONFIG = 1_000_000  # characters of STEPDBG_CONFIG (the CLI writes a few hundred)


@dataclass
class AgentConfig:
    breaks: list[str] = field(default_factory=lambda: list(DEFAULT_BREAKS))
    actions: list[str] = field(default_factory=lambda: ["report"])
    actions_given: bool = True  # False: nobody chose the actions, so an attached front end pauses
    report: str | None = None  # the JSON-lines report's path
    quiet: bool = False  # no stderr lines
    serve: bool = False  # a pause waits for a client (stepdbg run/serve, watch(serve=True))
    announce: bool = True  # with serve, `listening; attach with` on stderr (not under the TUI's launcher: it is
    # the front end, and says how to attach again when it leaves the job; relayed at the end, the line named a gone job)
    listen: str | None = None  # HOST:PORT to listen on besides the Unix socket
    detach_timeout: float | None = None  # a pause with no client resumes after this many seconds
    forward_output: bool = False  # the job's stdout/stderr go to the clients too
    rewind: dict[str, Any] = field(default_factory=dict)  # Rewinder.configure's arguments
    doctor: bool = False  # the diagnostic rules (stepdbg doctor / overfit)
    record_memory: bool = False  # saved activations by module; on CUDA, allocation history and snapshots
    skip_on_device: bool = False  # fused optimizers: a NaN step skipped on the device, told a step late (no sync)
    stop_after: int | None = None  # end the run (exit 0) after this many steps
    overfit: bool = False  # repeat the first batch (stepdbg overfit)
    bundle_dir: str | None = None  # where --on-break save writes (None: the job's working directory)
    argv: list[str] = field(default_factory=list)  # the job's command line, for status and the report
    fingerprint: dict[str, Any] | None = None  # stepdbg diff's recorder: {path, steps, max_calls}

    def __post_init__(self) -> None:
        for spec in self.breaks:
            parse(spec)  # a malformed condition is refused here, with ConditionError
        for a in self.actions:
            if a not in ACTIONS:
                raise ValueError(f"unknown action {a!r}; known: {', '.join(ACTIONS)}")
        check_rewind(**self.rewind)  # (what the Session would refuse, refused before it starts)
        if self.listen is not None:
            address.parse(self.listen)
        if self.fingerprint is not None:
            check_fingerprint(**self.fingerprint)
        t = self.detach_timeout  # NaN or below 0: a pause with no client resumed at once (as --detach-timeout takes)
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < math.inf):
            raise ValueError(f"detach_timeout must be a number of seconds above 0, e.g. 600, not {t!r}")
        n = self.stop_after  # 0 or below: the script never ran, and the run ended with exit code 0
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"stop_after must be a whole number of steps >= 1, not {n!r}")

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> AgentConfig:
        """The configuration the launcher wrote; unknown keys or bad values are refused."""
        if len(text) > MAX_CONFIG:
            raise ValueError(f"STEPDBG_CONFIG is {len(text):,} characters long; at most {MAX_CONFIG:,} are read")
        try:
            data = json.loads(text or "{}")
        except RecursionError:
            raise ValueError("STEPDBG_CONFIG is nested too deep to be a configuration") from None
        except ValueError as e:
            raise ValueError(f"STEPDBG_CONFIG is not JSON ({e})") from None
        known = {f.name: f for f in fields(cls)}
        if not isinstance(data, dict) or set(data) - set(known):
            raise ValueError(f"STEPDBG_CONFIG: unknown keys {sorted(set(data) - set(known)) if isinstance(data, dict) else data!r}")
        for name, value in data.items():  # `report: 7` would have written the report to fd 7
            accepts = _json_types(str(known[name].type))
            if not isinstance(value, accepts) or (isinstance(value, bool) and bool not in accepts):
                raise ValueError(f"STEPDBG_CONFIG: {name} is {known[name].type}, not {value!r}")
        try:
            return cls(**data)
        except (TypeError, ValueError) as e:  # (a ConditionError is a ValueError)
            raise ValueError(f"STEPDBG_CONFIG: {e}") from None


REWIND_KEYS = ("every", "keep", "lr_scale", "lr_steps", "max_rewinds")
FINGERPRINT_LIMIT = 1_000_000  # steps or module calls a step: more is a typo


def check_fingerprint(**spec: Any) -> None:
    """stepdbg diff's recorder's options: a path, and whole numbers of steps and module calls."""
    if set(spec) != {"path", "steps", "max_calls"}:
        raise ValueError(f"fingerprint needs path, steps and max_calls, not {sorted(spec)}")
    if not isinstance(spec["path"], str) or not spec["path"]:
        raise ValueError(f"fingerprint: path must be a file's path, not {spec['path']!r}")
    for name in ("steps", "max_calls"):
        value = spec[name]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= FINGERPRINT_LIMIT:
            raise ValueError(f"fingerprint: {name} must be a whole number from 1 to {FINGERPRINT_LIMIT:,}, "
                             f"not {value!r}")


def check_rewind(**opts: Any) -> None:
    """The rewind options (Rewinder.configure's), or ValueError naming the first bad one."""
    unknown = sorted(set(opts) - set(REWIND_KEYS))
    if unknown:
        raise ValueError(f"rewind: unknown options {unknown}; known: {', '.join(REWIND_KEYS)}")
    for name in ("every", "keep", "lr_steps", "max_rewinds"):
        value = opts.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ValueError(f"{name} must be a whole number >= 0, not {value!r}")
    if opts.get("keep") is not None and opts["keep"] < 1:
        raise ValueError("keep must be at least 1")
    lr_scale = opts.get("lr_scale")
    if lr_scale is not None and (isinstance(lr_scale, bool) or not isinstance(lr_scale, (int, float))
                                 or not 0 < lr_scale <= 1e6):
        raise ValueError(f"lr_scale must be a number > 0, not {lr_scale!r}")


def _json_types(annotation: str) -> tuple[type, ...]:
    """The JSON values a field's annotation takes ('str | None', 'list[str]', 'float | None')."""
    names = {"bool": (bool,), "str": (str,), "int": (int,), "float": (int, float), "None": (type(None),),
             "list": (list,), "dict": (dict,)}
    return tuple(t for part in annotation.split("|") for t in names.get(part.strip().split("[")[0], ()))
