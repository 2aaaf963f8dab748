"""stepdbg's terminal front end (installed as ``stepdbg_tui``).

It speaks only the protocol and never imports torch:

    from stepdbg_tui.app import StepdbgApp
    app = StepdbgApp(source)   # an AsyncClient or a JobSource (tests: a fake, tests/fake_source.py)
"""
