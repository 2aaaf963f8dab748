"""The REPL line's Tab after a dot (`model.he<Tab>`): the attributes of an object of the
paused frame, read in the job through the `eval` request by the agent's
stepdbg/agent/views/completion.py, which runs none of the user's code (no property) and
returns a bounded list. The line completed only names (the closing walk's Tab); the
console's prompt (tui/repl.py) asks the same way, by a blocking client."""

from __future__ import annotations

import ast
import re
from typing import Any

from stepdbg.client import ClientError

NONE = "Tab completes a name of the paused frame, a command of this line or an attribute after a dot"

# The dotted name before the cursor and the attribute being typed after its last dot.
AFTER_DOT = re.compile(r"(?<![\w.\])}'\"])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\.(\w*)$")
CAP = 60  # names asked for at most
READER = "stepdbg.agent.views.completion"


def asked(root: str, path: list[str], prefix: str) -> str:
    """The expression the job evaluates: `root` is a name (AFTER_DOT's), the rest literals."""
    return f"__import__({READER!r}, fromlist=['_']).attribute_names({root}, {tuple(path)!r}, {prefix!r}, {CAP})"


async def attribute_names(source: Any, dotted: str, prefix: str) -> list[str] | str:
    """The attributes of `dotted` (a name of the paused frame and attributes) that begin with
    `prefix`, or why there are none to say (not paused, no such name): the TUI's line."""
    root, *path = dotted.split(".")
    try:
        return _read(root, await source.evaluate(asked(root, path, prefix)))
    except ClientError as e:
        return _refused(e)


def attribute_names_now(client: Any, dotted: str, prefix: str) -> list[str] | str:
    """attribute_names of a blocking client (the console's prompt, `stepdbg attach --repl`)."""
    root, *path = dotted.split(".")
    try:
        return _read(root, client.evaluate(asked(root, path, prefix)))
    except ClientError as e:
        return _refused(e)


def _refused(e: ClientError) -> str:
    return f"attributes complete at a pause ({e})" if e.code == "not_paused" else str(e)


def _read(root: str, r: dict[str, Any]) -> list[str] | str:
    """The names in the job's answer, or why there are none."""
    if r.get("error"):
        last = r["error"].strip().splitlines()[-1]
        return f"no {root} in the paused frame" if last.startswith("NameError") else last
    try:
        names = ast.literal_eval(r.get("value") or "''")
    except (ValueError, SyntaxError):
        return "the attributes could not be read"
    return names.split() if isinstance(names, str) else []
