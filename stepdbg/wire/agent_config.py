"""The agent's configuration: one dataclass, built once from the command line (the CLI) or
from ``stepdbg.watch()``, and read by the Session. The launcher hands it to the job in
the environment variable STEPDBG_CONFIG as JSON (``to_json`` / ``from_json``); nothing
else configures a Session.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from stepdbg.wire.conditions import ACTIONS, ConditionError, parse

DEFAULT_BREAKS = ("nan", "exception")


@dataclass
class AgentConfig:
    breaks: list[str] = field(default_factory=lambda: list(DEFAULT_BREAKS))
    actions: list[str] = field(default_factory=lambda: ["report"])
    actions_given: bool = True  # False: nobody chose the actions, so an attached front end pauses
    report: str | None = None  # the JSON-lines report's path
    quiet: bool = False  # no stderr lines
    serve: bool = False  # a pause waits for a client (stepdbg run/serve, watch(serve=True))
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

    def __post_init__(self) -> None:
        for spec in self.breaks:
            parse(spec)  # a malformed condition is refused here, with ConditionError
        for a in self.actions:
            if a not in ACTIONS:
                raise ValueError(f"unknown action {a!r}; known: {', '.join(ACTIONS)}")

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> AgentConfig:
        """The configuration the launcher wrote; unknown keys or bad values are refused."""
        try:
            data = json.loads(text or "{}")
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
        except (TypeError, ConditionError) as e:
            raise ValueError(f"STEPDBG_CONFIG: {e}") from None


def _json_types(annotation: str) -> tuple[type, ...]:
    """The JSON values a field's annotation takes ('str | None', 'list[str]', 'float | None')."""
    names = {"bool": (bool,), "str": (str,), "int": (int,), "float": (int, float), "None": (type(None),),
             "list": (list,), "dict": (dict,)}
    return tuple(t for part in annotation.split("|") for t in names.get(part.strip().split("[")[0], ()))
