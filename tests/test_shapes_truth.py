"""The real-shaped scripts of ../shared/shapes against the truth each states (check.py runs
stepdbg on each as a user would, headless, then replays each saved bundle from another
folder): a top-level script with `loss / accum`, LBFGS's closure, two models, a NaN only in
one micro-batch's backward, an in-place write, dict batches, a model in a sibling module.
Skipped where the checkout has no ../shared/shapes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT, WAIT

CHECK = ROOT.parent / "shared" / "shapes" / "check.py"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not CHECK.is_file(), reason=f"no {CHECK} beside this checkout")]


def shapes() -> list[str]:
    """Each script with a truth line, by its path under shapes/ (one test each: the workers
    share them, where one test of all of them was the suite's longest)."""
    if not CHECK.is_file():
        return []
    found = sorted(CHECK.parent.glob("**/*.py"))
    return [str(p.relative_to(CHECK.parent)) for p in found
            if any(line.startswith("# truth:") for line in p.read_text(errors="replace").splitlines())]


@pytest.mark.parametrize("shape", shapes())
def test_every_shape_is_answered_as_its_truth_says_live_and_offline(shape):
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run([sys.executable, str(CHECK), shape], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=4 * WAIT, stdin=subprocess.DEVNULL)
    assert run.returncode == 0 and "2 passed, 0 failed" in run.stdout, run.stdout[-4000:] + run.stderr[-2000:]
