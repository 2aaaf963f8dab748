"""The sample outputs in README.md and docs/*.md are the program's own: each block marked
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


def test_every_sample_block_is_one_the_tool_runs():
    """A block the tool does not know would never be checked; a sample with no block, or
    with a block in two files, would be checked nowhere or in one place only."""
    shown = samples.shown()  # raises where a name is in two files
    assert set(shown) == set(samples.SAMPLES), (
        f"blocks with no sample: {sorted(set(shown) - set(samples.SAMPLES))}; "
        f"samples with no block in README.md or docs/*.md: {sorted(set(samples.SAMPLES) - set(shown))}")


def test_the_documents_read_are_the_readme_and_docs():
    read = samples.documents()
    assert read[0] == ROOT / "README.md"
    assert set(read[1:]) == set((ROOT / "docs").glob("*.md")) and len(read) > 1


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(samples.SAMPLES))
def test_a_readme_sample_is_what_the_command_prints_now(name):
    shown = samples.shown()
    assert name in shown, f"README.md and docs/*.md have no `<!-- sample: {name} -->` block"
    path, block = shown[name]
    assert samples.run(samples.SAMPLES[name]) == block, (
        f"{path.relative_to(ROOT)}: run `python scripts/readme_samples.py {name}`")
