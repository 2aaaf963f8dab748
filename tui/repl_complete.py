"""The REPL line's Tab after a dot (`model.he<Tab>`): the attributes of an object of the
paused frame, read in the job by its `complete` op (stepdbg/agent/views/completion.py, which
runs none of the user's code: no property) as a bounded list. It was an evaluated line,
`__import__(...)`, looked up in the paused frame first: a script's own `__import__` ran. The
line completed only names (the closing walk's Tab); the console's prompt (tui/repl.py) asks
the same way, by a blocking client."""

from __future__ import annotations

import re
from typing import Any

from stepdbg.client import ClientError

NONE = "Tab completes a name of the paused frame, a command of this line or an attribute after a dot"

# After an index or a call (`opt.param_groups[0].`, `f().`): the object is not a name's, and
# reading it would be evaluating the line (the seventeenth walk's 9: Tab said nothing there).
AFTER_INDEX = re.compile(r"[\])]\.\w*$")
NOT_AFTER_INDEX = ("completes an attribute after a name and dots (model.head.), not after an index or a "
                   "call: run the line to see the object")

# The dotted name before the cursor and the attribute being typed after its last dot.
AFTER_DOT = re.compile(r"(?<![\w.\])}'\"])([^\W\d]\w*(?:\.[^\W\d]\w*)*)\.(\w*)$")  # (`été.w` too)


async def attribute_names(source: Any, dotted: str, prefix: str) -> list[str] | str:
    """The attributes of `dotted` (a name of the paused frame and attributes) that begin with
    `prefix`, or why there are none to say (not paused, no such name): the TUI's line."""
    try:
        return list(await source.attribute_names(dotted, prefix))
    except ClientError as e:
        return _refused(e)


def attribute_names_now(client: Any, dotted: str, prefix: str) -> list[str] | str:
    """attribute_names of a blocking client (the console's prompt, `stepdbg attach --repl`)."""
    try:
        return list(client.attribute_names(dotted, prefix))
    except ClientError as e:
        return _refused(e)


def _refused(e: ClientError) -> str:
    return f"attributes complete at a pause ({e})" if e.code == "not_paused" else str(e)
