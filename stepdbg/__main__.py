import os
import sys

# `python -m stepdbg` put the current folder first on sys.path, where a bundle being
# replayed, or anything beside it, could ship a module a standard one imports later (a
# textwrap.py when argparse writes its help): stepdbg itself is already imported by now.
try:
    here = os.getcwd()
except OSError:  # a current folder that was removed: python -m put "" or nothing of it
    here = ""
if sys.path and sys.path[0] in ("", here):
    del sys.path[0]

from .cli import main  # noqa: E402 - after the current folder is off sys.path

sys.exit(main())
