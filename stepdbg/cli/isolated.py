"""stepdbg's own code run in a fresh interpreter with nothing of the current folder on
sys.path. `python -m` puts the current folder first: a bundle replayed or diffed from inside
it, or from beside it, could ship a torch.py or json.py that would be imported before any of
stepdbg's checks ran."""

from __future__ import annotations

import sys

_RUN = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
        "from {module} import main; sys.exit(main(sys.argv[1:]))")


def command(module: str, *args: str) -> list[str]:
    """The command that runs `module`'s main(args) so (`module` is stepdbg's, never data)."""
    if not module.startswith("stepdbg.") or not module.replace(".", "").replace("_", "").isalnum():
        raise ValueError(f"{module!r} is not one of stepdbg's modules")
    return [sys.executable, "-c", _RUN.format(module=module), *args]


__all__ = ["command"]
