"""The README's samples say a script's path as a run prints it (issue 45, the twelfth walk's
4): the program prints where a break is, and where a replay found the first bad value, with
the script's absolute path, as Python's tracebacks do; the sample generator cut this
checkout's path out, so the README said `at demos/nan_log.py:56`, which no run prints. It
writes the checkout as CHECKOUT (`/home/you/stepdbg`), and docs/report.md's hand-made sample
says it the same way. (tests/test_readme.py runs every sample against its block.)"""

from __future__ import annotations

import re

from test_readme import samples

# A place in a script as the job says it, absolute: under its break line ("  at FILE:LINE  code")
# and in a replay's summary ("... the first non-finite value (forward), at FILE:LINE"). (stepdbg
# diff says its places relative to where it runs: a sample of it is left as printed.)
PLACE = re.compile(r"^(?:stepdbg: )?(?:  at |.*first non-finite value \(\w+\), at )(\S+\.py):\d+", re.M)


def test_every_place_in_a_sample_is_a_path_a_run_prints():
    places = {name: PLACE.findall(block) for name, (_, block) in samples.shown().items()}
    assert places["quickstart"], places  # (the README's first sample says where the break is)
    for name, found in places.items():
        for path in found:
            assert path.startswith(f"{samples.CHECKOUT}/"), (name, path)


def test_the_checkout_stands_in_for_this_one_in_a_run_and_nowhere_else():
    ran = samples.run_one(samples.Sample("stepdbg --version"))  # (no path: the output as printed)
    assert samples.CHECKOUT not in ran and str(samples.ROOT) not in ran, ran
    assert "/work/main" not in (samples.ROOT / "docs" / "report.md").read_text()
