"""`stepdbg attach --repl` at a terminal: the console's commands with prompt-toolkit
line editing, a history file and completion of commands and of the paused frame's names
(after a dot, of an object's attributes: repl_complete, as the TUI's REPL line asks).

Events (a pause, the end of the job) are printed above the prompt as they arrive.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, WordCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.patch_stdout import patch_stdout

from stepdbg.client import ClientError
from stepdbg.client.console import IDLE_CTRL_C, detach, end_words, error_line, execute, show_source
from stepdbg.client.replays_heard import pause_words, replays_heard
from stepdbg.wire.conditions import ConditionError
from stepdbg.wire.fold import fold, for_terminal

from .repl_complete import AFTER_DOT, AFTER_INDEX, NOT_AFTER_INDEX, attribute_names_now

COMMANDS = ["c", "n", "s", "r", "p", "lr", "skip", "info", "model", "opt", "mem", "threads", "breaks", "source",
            "history", "timings", "status", "break", "add", "rm", "until", "pause", "q", "detach", "help"]


def history_path() -> str:
    """The console's history file, 0600 (it holds code typed into jobs), in a 0700 folder."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    folder = os.path.join(base, "stepdbg")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, "repl_history")
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    os.chmod(path, 0o600)  # one made before this rule was 0644
    return path


class _Names(Completer):
    """Commands plus the names in the paused frame, refreshed at each pause; after a dot
    (`model.tra<Tab>`) the attributes of the object before it, read in the job (it completed
    names only); why there are none (not paused, no such name) is said above the prompt."""

    def __init__(self, client: Any = None) -> None:
        self.client = client
        self.names = WordCompleter(list(COMMANDS), sentence=False, match_middle=False)

    def set_names(self, names: list[str]) -> None:
        self.names.words = sorted(set(COMMANDS) | set(names))

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        dot = AFTER_DOT.search(document.text_before_cursor)
        if dot is None and AFTER_INDEX.search(document.text_before_cursor):
            print(f"Tab: {NOT_AFTER_INDEX}")
            return
        if dot is None:
            yield from self.names.get_completions(document, complete_event)
            return
        found = attribute_names_now(self.client, dot.group(1), dot.group(2))
        if isinstance(found, str):
            print(f"Tab: {found}")
            return
        if not found:
            print(f"Tab: no attribute of {dot.group(1)} begins with {dot.group(2)!r}")
        for name in found:
            yield Completion(name, start_position=-len(dot.group(2)))


class _Watch:
    """What the REPL shows between lines: pauses as they come (with the paused frame's names
    for completion) and the job's end, after which the prompt returns and the REPL leaves."""

    def __init__(self, client: Any, session: PromptSession[str], completer: _Names) -> None:
        self.client, self.session, self.completer = client, session, completer
        self.stop = threading.Event()
        self._told = threading.Lock()  # held once the end is said: by this watch or by a line typed as it came

    def refresh_names(self) -> None:
        with contextlib.suppress(Exception):
            self.completer.set_names(list(self.client.attribute_names("", "")))  # (read running none of your code)

    def leave_when_ended(self) -> None:
        """The job ended: the prompt waiting for a line returns at once, so the REPL leaves
        with the job's exit code. Called on the prompt's own loop (at its start, too: the
        end may come between the loop's check and the prompt)."""
        app = self.session.app
        if self.client.exited is not None and app.is_running and not app.is_done:
            app.exit(result=None)

    def tell_end(self, lost: str | None = None) -> int:
        """Say how the job ended, once (a job killed: gone, its pid, no exit code); the exit code."""
        words, code = end_words(self.client, lost)
        if self._told.acquire(blocking=False):
            print("\n" + words)
        return code

    def run(self) -> None:
        client, shown = self.client, None
        while not self.stop.is_set():
            brk = client.wait_paused(timeout=0.5, previous=shown)  # waits: a pause already shown returns None
            if client.exited is not None and not self.stop.is_set():  # not after we left ourselves
                self.tell_end()
                loop = self.session.app.loop
                if loop is not None:
                    loop.call_soon_threadsafe(self.leave_when_ended)
                return
            if brk is not None and brk is not shown:
                shown = brk
                print("\n".join(pause_words(brk)))  # (a replay run before this REPL attached: said)
                with contextlib.suppress(Exception):
                    show_source(client)
                self.refresh_names()
            for words in replays_heard(client):  # (r at another client: said here once)
                print(words)


class Folded:
    """A stream whose lines are folded at the terminal's width between words: the terminal's
    own wrap broke a number at the 80th column (`1.234` over `56789`). A word longer than a
    line is left whole (the terminal wraps it)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.pending = ""  # the line written so far, not ended yet

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            self.stream.write(fold(line, shutil.get_terminal_size().columns) + "\n")
        return len(text)

    def flush(self) -> None:  # (a prompt written with end="": as it is)
        if self.pending:
            self.stream.write(self.pending)
            self.pending = ""
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty...: the stream's
        return getattr(self.stream, name)


def run_repl(client: Any) -> int:
    completer = _Names(client)
    session: PromptSession[str] = PromptSession(history=FileHistory(history_path()), completer=completer,
                                                complete_while_typing=False)
    watch = _Watch(client, session, completer)
    stop = watch.stop

    st = client.status_at_attach or {}
    print(for_terminal(f"attached to pid {client.session.get('pid')}, step {st.get('step')}, {st.get('state')}; "
                       "h for help, detach or Ctrl-D to leave (the job stays as it is), q ends the job", sys.stdout))
    with patch_stdout(), contextlib.redirect_stdout(folded := Folded(sys.stdout)), contextlib.redirect_stderr(folded):
        watcher = threading.Thread(target=watch.run, daemon=True)
        watcher.start()
        try:
            while client.exited is None:
                try:
                    line = session.prompt("(stepdbg) ", pre_run=watch.leave_when_ended)
                    if line is None:  # left because the job ended
                        break
                except EOFError:
                    line = "detach"
                except KeyboardInterrupt:
                    print(IDLE_CTRL_C.format(", `detach` or Ctrl-D leaves"))
                    continue
                code = _run_line(client, line, watch)
                if code is not None:
                    return code
        finally:
            stop.set()
    return end_words(client)[1]


def _run_line(client: Any, line: str, watch: _Watch) -> int | None:
    """One line typed: the REPL's exit code when it leaves (detach, a lost job), else None."""
    try:
        if execute(client, line) == "detach":
            watch.stop.set()
            print(detach(client, line))
            return 0
    except (ConditionError, ValueError, KeyError, LookupError, RuntimeError, ClientError) as e:
        print(error_line(e))
    except ConnectionError as e:
        watch.stop.set()
        return watch.tell_end(str(e))
    return None
