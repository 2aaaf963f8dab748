"""The one rule for toasts (issue 45, the ninth walk's 1 and 2).

A toast stands at the bottom right, under the REPL line (break_panel's CSS): over the
footer's key hints and the REPL box's lower border, not over a panel line. Under the tabs
it covered the right half of the panel's first lines, a table's last column at 80x24 (the
Breaks panel's `checked at`, the Break panel's end words: the twelfth walk's 4); one row
higher, Textual's place, it covered the REPL line and its answer (the ninth walk's 18).
It is as wide as three quarters of the screen, so that its words take one or two rows
there. So a toast is short-lived and small, whatever its caller asks:

- it stands TOAST_SECONDS at most (the diff's answer stood 30 s over the Break panel's
  first lines, a lost connection's 10 s);
- it has no blank rows (Textual's padding put one above and one under its words: a line of
  words covered three of the panel's);
- the oldest go where there are more than the terminal has room for beside the panel's
  fields (at 80x24 three covered the Tensor panel's slice field: the fifth walk's 12).

What must stay, or is long, is said in its place, and a toast never says it alone: under
the REPL line (ControlActions.say: the diff's answer, a refusal of what was typed there), in
the Log, in the header (a lost connection: its toast says what to do, not the header's words
again). A key refused on a panel is said in a toast, one at a time (ControlActions.refuse:
the person looks at the panel, not under the REPL line); what it refuses for stays on screen
(the header's end, the footer without the key).
"""

from __future__ import annotations

import re
from typing import Any

from textual.notifications import Notification

TOAST_SECONDS = 4.0
# Textual's Toast is drawn with `padding: 1 1`, 60 columns wide and half the screen at most
# (at 80 columns 36 columns of words: the LR's toast took 3 rows, and it was measured at 60,
# one row short, its last row under the screen's); scoped to the app's screen (a dialog's own
# toasts keep theirs: nothing is under them but the dialog's own frame).
# The rack keeps no scrollbar's columns: it measured its height 60 columns wide and drew its
# toasts 58 wide, so a toast of 3 rows at 60 took 4, its last row under the screen's bottom
# (the closing walk's 6: `(exit code 3)` cut); the oldest go anyway (make_room).
CSS = "ToastRack { scrollbar-size-vertical: 0; } ToastRack Toast { padding: 0 1; max-width: 75%; }"
# The rows a toast may take at 80 columns (its margin and up to 5 lines of words) and the rows
# the toasts leave free: the header, the tabs and a panel's fields above, the REPL line under.
TOAST_ROWS, TOAST_FREE = 6, 12
# A dialog's toasts (one that came while it is open) stand on the screen's last rows, over its
# footer, under its buttons, not over them (the closing walk's 6: Textual's padding and margins
# took 3 rows and more); a dialog opening takes down those there were (dialogs.ChoiceScreen).
DIALOG_CSS = "ToastRack { margin-bottom: 0; scrollbar-size-vertical: 0; } ToastRack Toast { padding: 0 1; margin-top: 0; }"


def standing(timeout: float | None) -> float:
    """How long a toast stands: what its caller asked (Textual's default where none), at
    most TOAST_SECONDS."""
    return TOAST_SECONDS if timeout is None else min(timeout, TOAST_SECONDS)


def make_room(app: Any, message: str = "") -> str:
    """Takes down the oldest toasts of `app` so that one more fits beside the panel's fields;
    `message` as the toast says it (one_label)."""
    message = one_label(message)
    room = max(1, (app.size.height - TOAST_FREE) // TOAST_ROWS)
    for old in list(app._notifications)[:max(0, len(app._notifications) - room + 1)]:
        app._unnotify(old, refresh=False)
    return message


def once(app: Any, notification: Notification) -> None:
    """As `notification` is shown (Textual's Notify handled): a toast that says its words already
    goes, so they are said once (`u` pressed four times at the outermost frame stacked four, the
    closing walk's 6; `d d` typed at once at the innermost, both answers told before either toast
    was shown, stacked two: the seventeenth walk's 3)."""
    for same in [n for n in app._notifications if n.message == notification.message and n is not notification]:
        app._unnotify(same, refresh=False)


# A request's name, then the job's own label of its refusal: `next phase: n: at an uncaught
# exception ...` said the key twice (the closing walk's 6); the job's label alone is kept.
_TWO_LABELS = re.compile(r"[A-Za-z][\w ]{0,24}: (?=[\w+-]{1,12}: )")


def one_label(message: str) -> str:
    """`message` with one label: the job's (`n: at an uncaught ...`), not the request's before it
    too; none where the words begin with the label (`rewind: rewind needs a paused job`)."""
    label, _, words = message.partition(": ")
    if words.startswith(f"{label} "):
        return words
    return _TWO_LABELS.sub("", message, count=1) if _TWO_LABELS.match(message) else message


def lr_words(lr: float, groups: Any) -> str:
    """'lr 0.01 -> 0.002', the LR toast's label, from the groups the job's answer names (the
    toast said `lr: every update from now uses it`, neither LR: the closing walk's 20)."""
    was = sorted({f"{g['old']:g}" for g in groups or [] if isinstance(g, dict) and isinstance(g.get("old"), (int, float))})
    return f"lr {', '.join(was) + ' -> ' if was else ''}{lr:g}"
