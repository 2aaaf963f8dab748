"""A torchrun job's stepdbg lines on the launcher's terminal, each said once for the job
(issue 45, the twelfth walk's 1 and 3). Under torchrun every rank's agent says what it
sees, so the terminal said one break of the job three times: the rank that broke said its
break where it saw it (`break at step 6 (before_backward) [nan]: loss is nan`, at the line
that broke), then each rank its pause for it where every rank paused (rank 0's `paused for
rank 1's break at step 6: ...`, rank 1's `this rank broke: ...`, both at the update's line).
And headless, every rank's first break said `the job goes on: report is the default action
...`, a note to the person, once per rank.

The job's record is the break where the rank broke (its step, phase and line); a rank's
pause for a break (the agent's as_one_job.for_rank) is that break again, and is not said
(nor its `  at FILE:LINE`); the note is said once. Everything else passes unchanged."""

from __future__ import annotations

import re

# A rank's line (torchrun's `[default0]:` before it when it tees the ranks' output).
PREFIX = re.compile(r"^(\[[A-Za-z_]*?\d+\]:)?(.*)$")
BREAK = re.compile(r"stepdbg\[rank \d+\]: break at step \d+ \([^)]*\) \[[^\]]*\]: (.*)$")
# The reason of a pause for a rank's break (as_one_job.for_rank): another's, or the rank's own again.
AGAIN = re.compile(r"(?:paused|replayed) for rank \d+'s break at step \d+: |this rank broke: |"
                   r"(?:paused|replayed) at step \d+ for this rank's break at step \d+: ")
NOTE = re.compile(r"stepdbg\[rank \d+\]: (.*: report is the default action; .*)$")  # (breaker's newcomer note)
AT = re.compile(r"  at \S.*:\d+(  |$)")  # a break's own second line (breaker.take: `  at FILE:LINE  code`)


class SaidOnce:
    def __init__(self) -> None:
        self.notes: set[str] = set()
        self.dropping: set[str] = set()  # writers (a rank's prefix) whose left-out pause's `  at` may come next

    def shown(self, line: str) -> bool:
        """Whether the launcher prints this line of the job's stderr."""
        m = PREFIX.match(line)
        writer, text = (m.group(1) or "", m.group(2)) if m else ("", line)
        if writer in self.dropping:  # the pause's own `  at FILE:LINE`, its one line: any other (a new
            self.dropping.discard(writer)  # break's `  at`, a replay's `  domain:`, the job's own) is shown
            if AT.match(text):
                return False
        brk, note = BREAK.match(text), NOTE.match(text)
        if brk is not None and AGAIN.match(brk.group(1)):
            self.dropping.add(writer)
            return False
        if note is not None and note.group(1) in self.notes:  # (one line)
            return False
        if note is not None:
            self.notes.add(note.group(1))
        return True
