"""The console's line at the job's own terminal (`--no-tui`): Python's readline, as pdb
uses it, for editing, its own history (Up) and Tab, which completes a command, a name of
the paused frame and, after a dot, an attribute (read in the job by the `complete` op, running
none of the user's code). Elsewhere (a pipe, STEPDBG_CONSOLE=1, no readline) the line is read
as it was, bounded. The job's own readline state (its completer, its history) is put back
after each line: nothing of the console's is left in it."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

HISTORY_MOST = 1000  # lines of the console's own history
DELIMS = " \t\n`~!@#$%^&*()-=+[{]}\\|;:'\",<>/?"  # (not the dot: `model.hea<Tab>` is one word)


def at_terminal() -> bool:
    """Whether the line is typed at a terminal, with readline, that the prompt (input()
    writes it to stdout) and the input both use: else the line is read as a pipe's."""
    try:
        tty = sys.stdin is not None and sys.stdout is not None and sys.stdin.isatty() and sys.stdout.isatty()
    except (ValueError, AttributeError):
        return False
    return tty and _readline() is not None


def _readline() -> Any:
    try:
        import readline
    except ImportError:  # (a Python built without it)
        return None
    return readline


class ConsoleLine:
    """Reads the console's lines at a terminal with readline; `complete(text)` gives the
    words Tab offers for `text` (the word before the cursor, dots included)."""

    def __init__(self, complete: Callable[[str], list[str]]) -> None:
        self.complete = complete
        self.history: list[str] = []
        self._found: list[str] = []

    def read(self, prompt: str) -> str | None:
        """A line typed (None at Ctrl-D)."""
        readline = _readline()
        with self._ours(readline), ctrl_c_ours():
            try:
                line = input(prompt)
            except EOFError:
                return None
        if line.strip() and (not self.history or self.history[-1] != line):
            self.history = [*self.history, line][-HISTORY_MOST:]
        return line + "\n"

    def _offer(self, text: str, state: int) -> str | None:
        """readline's completer: the state-th word for `text`."""
        if state == 0:
            try:
                self._found = self.complete(text)
            except Exception:  # (the job went, or would not say: nothing offered)
                self._found = []
        return self._found[state] if state < len(self._found) else None

    @contextlib.contextmanager
    def _ours(self, readline: Any) -> Iterator[None]:
        """The console's completer, delimiters and history for one line; the job's put back."""
        theirs = [readline.get_history_item(i) for i in range(1, readline.get_current_history_length() + 1)]
        completer, delims = readline.get_completer(), readline.get_completer_delims()
        readline.clear_history()
        for line in self.history:
            readline.add_history(line)
        readline.set_completer(self._offer)
        readline.set_completer_delims(DELIMS)
        readline.parse_and_bind("tab: complete")
        try:
            yield
        finally:
            readline.set_completer(completer)
            readline.set_completer_delims(delims)
            readline.clear_history()
            for line in theirs:
                if line is not None:
                    readline.add_history(line)


@contextlib.contextmanager
def ctrl_c_ours() -> Iterator[None]:
    """Ctrl-C at the prompt raises KeyboardInterrupt here, the console's ('Ctrl-C here does
    nothing to the job'), where the script set its own SIGINT handler: Python ran that handler
    on this thread (the main one, paused) while the line was read, in silence. The script's
    is put back after the line; `interrupt` runs it."""
    theirs = signal.getsignal(signal.SIGINT)
    if theirs is None or threading.current_thread() is not threading.main_thread():
        yield  # (a handler set outside Python, or a thread where none can be set: left as it is)
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, theirs)


def words_for(target: Any, commands: list[str]) -> Callable[[str], list[str]]:
    """What Tab offers at the console of `target` (a Session's calls, or a Client)."""
    def complete(text: str) -> list[str]:
        dotted, dot, prefix = text.rpartition(".")
        if dot and not dotted:  # (`x[0].sh`, `"a".up`: no name before the dot, nothing known of it)
            return []
        if dot:
            return [f"{dotted}.{n}" for n in target.attribute_names(dotted, prefix)]
        names = list(target.attribute_names("", text))
        return sorted({*names, *(c for c in commands if c.startswith(text))})
    return complete
