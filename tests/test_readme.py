"""The README's sample outputs are the program's own: each block marked
`<!-- sample: NAME -->` is what running it prints now (scripts/readme_samples.py)."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from conftest import ROOT

spec = importlib.util.spec_from_file_location("readme_samples", ROOT / "scripts" / "readme_samples.py")
assert spec is not None and spec.loader is not None
samples = sys.modules["readme_samples"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(samples)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", sorted(samples.SAMPLES))
def test_a_readme_sample_is_what_the_command_prints_now(name):
    shown = samples.blocks(samples.README.read_text())
    assert name in shown, f"README.md has no `<!-- sample: {name} -->` block"
    assert samples.run(samples.SAMPLES[name]) == shown[name], f"run `python scripts/readme_samples.py {name}`"
