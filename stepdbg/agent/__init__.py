"""Everything that runs inside the training process: what runs inside your job is here.

- ``session``: the Session facade, composed of
  ``step_model`` (torch hooks → phases → steps), ``breakpoints`` (conditions checked at a
  pause point), ``controls`` (pause/resume and work handed to the training thread) and
  ``changes`` (LR, pins, skip);
- ``replay``, ``inspection``, ``diagnostics``, ``watchdog``, ``ranks``: what a paused or
  running step offers; they take the step model, not the Session;
- ``server``: the listener and one thread per client; ``report``: JSON lines;
- ``bootstrap`` / ``autostart``: how a script gets an agent before its first line.

Every hook is guarded: a failure logs, turns that hook off and never reaches the loop.
This package may import torch; it never imports textual, rich or prompt_toolkit.
"""
