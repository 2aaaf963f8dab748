"""stepdbg's terminal front end (installed as ``stepdbg_tui``).

It speaks only the protocol and never imports torch. The Textual app lands with the
protocol and TUI issues; this package exists now so the import name is reserved.
"""
