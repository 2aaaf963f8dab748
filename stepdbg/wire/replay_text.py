"""A break's reason once its step was replayed, in one place for every front end. The agent's
reason asks for a replay where only one can name the op (`... it came with the data (replay
the step to name it)`; `(replay the step to tell whether ...)`, `; replay the step to look`);
once replayed it points at the replay that names it: the Break panel's `(the replay below
names it)`, rank 0's `(rank 1's replay names it: t)`, the Ranks panel's and the console's
`(the replay at this pause names it)` (the closing walks' 22, and of 05:50's 3, 4 and 7: the
Ranks panel and `info status` still asked for the replay that ran). Standard library only."""

from __future__ import annotations

import re
from typing import Any

ASKS_REPLAY = re.compile(r"(\(|; )replay the step to [^)]*\)")
AT_THIS_PAUSE = "the replay at this pause"  # where the pause's record says its step was replayed (status)


def replayed(reason: str, whose: str = "the replay below", then: str = "") -> str:
    """`reason` whose ask for a replay says that `whose` names it (`then`: how to see it)."""
    return ASKS_REPLAY.sub(lambda m: f"({whose} names it{then})" if m.group(1) == "(" else
                           f"; {whose} says which{then})", reason)


def pause_reason(paused: dict[str, Any]) -> str:
    """A pause's reason as status says it: after a replay at this pause (its `replayed`), the
    replay's words in place of the ask; a rank paused for another rank's break (the agent's
    `for_rank`, not the rank that broke, whose pause keeps its break: `broke`), that rank's."""
    reason = str(paused.get("reason") or "")
    if not paused.get("replayed"):
        return reason
    details = paused.get("details") or {}
    other = details.get("for_rank") is not None and "broke" not in details
    return replayed(reason, f"rank {details['for_rank']}'s replay" if other else AT_THIS_PAUSE)


ON_BREAK = "on_break"  # a replay's `asked_by`: the --on-break replay action ran it, no client


def who_asked(data: dict[str, Any], client: str = "another client asked") -> str:
    """Who asked for a replay this front end did not: the --on-break action, or another
    client (the Log said another client's first replay as if its own `r`'s)."""
    return "the --on-break replay" if data.get("asked_by") == ON_BREAK else client
