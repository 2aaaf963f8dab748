"""The help (?): the keys, and what the REPL line (e) takes besides Python. Each line fits
72 columns: the dialog's inside at an 80-column terminal (a longer line wrapped to the left
edge, out of its column). The REPL line's words were missing (the closing walk's 15: `?`
named none of lr, break, until...), and its Tab line read `in a field, a field`."""

from __future__ import annotations

from .panel_table import help_lines

HELP = f"""\
[b]keys[/b]   (escape, ? or q closes this; ↑↓ PgUp PgDn scroll it)
  c       continue                 p   pause at the next pause point
  n       next phase               s   same pause point, next step
  r       replay the step under anomaly detection: the op, module, line
  D       diff: the step twice from the same state; where the runs part
          (module, op, line) and the randomness that moved (the Log)
  l       set the learning rate (once or pinned)
  k       skip this step's update
  R       rewind to the newest snapshot before this step, where
          this step ends; then the job runs on, as after c
          (--keep-every N; the Memory panel lists them)
  b       breakpoints: the add box takes what is typed, Enter adds it
  e       the REPL line: Python at the pause, and the words below
  3       Tensor: typing goes to its name field (a digit to begin a
          name: that panel; Tab: the slice; escape: the job's keys)
  Tab     the next field or table (shift+Tab: back); from a field,
          the next field; on the REPL line it completes instead
  Enter   in a field: runs it; on a row: Model, its first parameter
          in Tensor; Mem, that tensor; Ranks, that rank in view
{help_lines()}
  u d     select the frame out (toward main) / in: the source, the
          locals and the REPL line follow
  q       quit: continue the job, leave it paused (to attach again)
          or end it
  ctrl+c  interrupt the job (its own Ctrl-C handling runs) or quit;
          in the REPL line: its code
  ctrl+r  reconnect after the connection was lost
  t       the next rank (a distributed job)
  0       Ranks: every rank's state (running, paused, in a collective
          with the time its timeout leaves, dead with its exit code)
  o       which ranks get stepping, LR, skip, breakpoints (0,2-3, all)
  ? h     this help
  escape  close a dialog, leave a field (keys are keys again; in
          Breaks its table: space turns one on/off, delete removes)

[b]the REPL line[/b] (e)   Python in the paused frame, and these words:
  p EXPR              a tensor's summary, e.g. p loss
  lr X \\[pin]          set the LR; pin: kept against schedulers
  break add SPEC      a breakpoint, e.g. break add grad_norm>100;
                      break rm SPEC, break off SPEC, break on SPEC
  until N             run to step N (a step ahead of this one)
  pause               pause the running job at its next pause point
  rewind \\[STEP]       back to the newest snapshot (before step STEP)
  w (where)  u \\[N]  d \\[N]   the stack; select the frame N out / N in
  info WHAT, locals   open the panel that shows it (info model, ...)
  diff ranks          the first parameter or gradient whose replicas
                      differ across the ranks (a distributed job)
  save                the step's evidence bundle (stepdbg replay PATH)
  Tab                 complete a name, or an attribute after a dot
  ↑ ↓                 earlier and later lines
  an answer too long to show under the line: the Log (9) has it whole"""
