"""The environment variables that tune stepdbg (time limits, the ssh command), read in
one place.

The command line checks them before anything starts (a bad value is a one-line error,
exit code 2); inside a job, where nothing may fail the training, a bad value means the
default. Standard library only (both halves read them)."""

from __future__ import annotations

import math
import os
import shlex

from .protocol import AUTH_TIMEOUT

# name: (default seconds, whether 0 means "no limit", what it limits)
SECONDS = {
    "STEPDBG_AUTH_TIMEOUT": (AUTH_TIMEOUT, False, "how long a new connection has to say hello"),
    "STEPDBG_CLIENT_STALL": (30.0, False, "how long a client may stop reading before it is dropped"),
    "STEPDBG_EVAL_TIMEOUT": (60.0, True, "how long code run at a pause may take (0: no limit)"),
}


class SettingError(ValueError):
    """An environment variable with a value stepdbg cannot use; the message says what to set."""


def seconds(name: str) -> float | None:
    """The variable's number of seconds (None: no limit), or SettingError."""
    default, zero_is_none, what = SECONDS[name]
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if value == 0 and zero_is_none:
        return None
    if not 0 < value < math.inf:
        least = "0 or more" if zero_is_none else "above 0"
        raise SettingError(f"{name}={raw!r}: expected a number of seconds {least} ({what}); e.g. {name}={default:g}")
    return value


def seconds_or_default(name: str) -> float | None:
    """As `seconds`, but a value that cannot be used gives the default: for the job's side."""
    try:
        return seconds(name)
    except SettingError:
        return SECONDS[name][0]


def _command(name: str, default: str, example: str) -> list[str]:
    """The environment variable `name` as a command's words (default: `default`), or
    SettingError: unbalanced quotes, or empty (set to nothing, not unset)."""
    raw = os.environ.get(name, default)
    try:
        words = shlex.split(raw)
    except ValueError as e:
        raise SettingError(f"{name}={raw!r} cannot be split into words ({e})") from None
    if not words:
        raise SettingError(f"{name} is empty: set it to {example} or unset it")
    return words


def ssh_command() -> list[str]:
    """STEPDBG_SSH as words (default: ssh), or SettingError."""
    return _command("STEPDBG_SSH", "ssh", "the ssh command (e.g. 'ssh -F my_config')")


def remote_command() -> list[str]:
    """STEPDBG_REMOTE as words (default: stepdbg), or SettingError: the stepdbg command on
    a remote host (empty, ssh would have run the bare `ls --json` there)."""
    return _command("STEPDBG_REMOTE", "stepdbg", "the stepdbg command on the remote host (e.g. '~/venv/bin/stepdbg')")


def check_environment() -> None:
    """Raise SettingError for the first variable set to a value stepdbg cannot use."""
    for name in SECONDS:
        seconds(name)
    ssh_command()
    remote_command()
