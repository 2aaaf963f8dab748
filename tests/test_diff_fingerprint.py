"""The fingerprint of tensors that failed or lied (issue 46, the attacker's findings): a
conj() complex tensor, float8, nested tensors, an expanded view of 10**9 values; each
is read correctly, in bounded memory, or says in words why it was not. Real torch; the
expanded view is fingerprinted in a fresh interpreter, whose peak memory is its own."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys

import pytest
import torch
from conftest import ROOT
from test_diff import answer, diff, line

from stepdbg.agent.diff.fingerprint import SAMPLES, fingerprint
from stepdbg.wire.step_diff import Record, compare


def picks(n: int) -> list[int]:
    k = min(n, SAMPLES)
    return [i * (n - 1) // max(k - 1, 1) for i in range(k)]


def test_a_conj_complex_tensor_is_its_resolved_values():
    """z.conj() carries the conj bit (view_as_real refused it: the recorder failed)."""
    z = torch.randn(4, 3, dtype=torch.complex64)
    f = fingerprint(z.conj())
    resolved = z.conj().resolve_conj()
    assert f == fingerprint(resolved) and f["hash"] != fingerprint(z)["hash"]
    flat = torch.view_as_real(resolved).reshape(-1)
    assert f["samples"] == flat[picks(flat.numel())].double().tolist()
    assert f["hash"] == hashlib.blake2b(flat.view(torch.uint8).numpy(), digest_size=8).hexdigest()
    neg = z.conj().imag  # the neg bit
    assert fingerprint(neg) == fingerprint(neg.clone()) and fingerprint(neg)["stats"][0] == pytest.approx(
        -z.imag.mean().item())


@pytest.mark.parametrize("dtype", [getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                                                                "float8_e5m2fnuz", "float8_e8m0fnu") if hasattr(torch, n)])
def test_float8_is_hashed_and_summed_as_its_values(dtype):
    """float8 has no arithmetic of its own (its sum failed: 'Promotion for Float8 Types')."""
    x = torch.tensor([0.5, 1.0, 2.0, 4.0, 8.0]).to(dtype)
    f = fingerprint(x)
    wide = x.double()
    assert f["hash"] == hashlib.blake2b(x.view(torch.uint8).numpy(), digest_size=8).hexdigest()
    assert f["samples"] == wide.tolist() and f["nonfinite"] == 0
    assert f["stats"] == pytest.approx([wide.mean().item(), wide.abs().mean().item(), wide.square().mean().sqrt().item(),
                                        wide.abs().max().item()])
    assert fingerprint(torch.tensor([8.0, 4.0, 2.0, 1.0, 0.5]).to(dtype))["hash"] != f["hash"]


@pytest.mark.skipif(not hasattr(torch, "float4_e2m1fn_x2"), reason="this torch has no float4")
def test_float4_pairs_are_read_as_their_decoded_values():
    """float4_e2m1fn_x2 (two values a byte, no kernels at all) was 'unreadable' ('copy_kernel
    not implemented'): its bytes are hashed and its values decoded, the first of a byte in
    its low 4 bits; one nibble apart is another hash; a column and an expanded view too."""
    b = torch.tensor([[0x21, 0x8F], [0x07, 0x70]], dtype=torch.uint8)
    f = fingerprint(b.view(torch.float4_e2m1fn_x2))
    values = [0.5, 1.0, -6.0, -0.0, 6.0, 0.0, 0.0, 6.0]
    assert f["samples"] == values and f["nonfinite"] == 0 and "unreadable" not in f and f["shape"] == [2, 2]
    assert f["stats"] == pytest.approx([sum(values) / 8, sum(map(abs, values)) / 8,
                                        (sum(v * v for v in values) / 8) ** 0.5, 6.0])
    other = b.clone()
    other[1, 1] = 0x71
    assert fingerprint(other.view(torch.float4_e2m1fn_x2))["hash"] != f["hash"]
    assert fingerprint(b.view(torch.float4_e2m1fn_x2)[:, 1])["samples"] == [-6.0, -0.0, 0.0, 6.0]
    wide = fingerprint(b[0:1].view(torch.float4_e2m1fn_x2).expand(3, 2))
    assert (wide["expanded"], wide["samples"][:4]) == (3, [0.5, 1.0, -6.0, -0.0])
    assert json.loads(json.dumps(f)) == f


def test_nested_tensors_are_read_part_after_part_in_both_layouts():
    """A nested tensor's shape failed ('NestedTensorImpl doesn't support sizes'); a jagged
    one was 'unreadable' with a shape holding j1, which is neither JSON nor the same from run
    to run. Both layouts of the same parts now give one fingerprint: the parts' values one
    after the other, and their shapes."""
    parts = [torch.randn(2, 3), torch.randn(4, 3)]
    flat = torch.cat([p.reshape(-1) for p in parts])
    fs = [fingerprint(torch.nested.nested_tensor(parts, layout=layout)) for layout in (torch.strided, torch.jagged)]
    assert fs[0] == fs[1]
    f = json.loads(json.dumps(fs[0]))
    assert f["shape"] == [2] and f["parts"] == [[2, 3], [4, 3]] and "unreadable" not in f
    assert f["hash"] == hashlib.blake2b(flat.numpy().view("uint8"), digest_size=8).hexdigest()
    assert f["samples"] == flat[picks(flat.numel())].double().tolist()
    assert f["stats"][0] == pytest.approx(flat.mean().item())
    other = torch.nested.nested_tensor([flat[:9].reshape(3, 3), flat[9:].reshape(3, 3)], layout=torch.jagged)
    g = fingerprint(other)  # the same values, cut otherwise: same bytes, other parts
    assert g["hash"] == f["hash"] and compare(f, g, 1, 1)["reason"].startswith("the nested tensors' parts differ")


EXPANDED = """
import json, resource, torch
from stepdbg.agent.diff.fingerprint import fingerprint
x = torch.tensor([[1.5], [-2.0]]).expand(2, 5 * 10**8)
y = torch.tensor([[float("inf")], [1.0]]).expand(2, 5 * 10**8)
z = torch.arange(2 * 10**5, dtype=torch.float32).as_strided((10**5, 10**5), (1, 1))
print(json.dumps([fingerprint(x), fingerprint(y), fingerprint(z), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]))
"""


def test_an_expanded_view_of_a_billion_values_is_read_from_its_storage():
    """`t.expand(10**9)` was made contiguous (4 GB) and summed in float32 (mean |x| 0.67
    where it is 1.75). Now its storage is read, each value standing for the times it is
    repeated: exact statistics, the samples of the view, the non-finite values counted
    as the view holds them, in the memory of an interpreter with torch (well under the
    4 GB a copy takes). A view that reads its storage over and over (as_strided) is said
    to be fingerprinted by that storage region."""
    r = subprocess.run([sys.executable, "-c", EXPANDED], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    x, y, z, peak_kb = json.loads(r.stdout)
    assert peak_kb < 1_500_000, f"peak memory {peak_kb} KB"
    assert x["shape"] == [2, 5 * 10**8] and x["expanded"] == 5 * 10**8 and x["nonfinite"] == 0
    assert x["stats"] == pytest.approx([-0.25, 1.75, math.sqrt((1.5**2 + 2.0**2) / 2), 2.0], rel=1e-12)
    assert x["samples"] == [1.5] * 8 + [-2.0] * 8
    assert y["nonfinite"] == 5 * 10**8 and y["stats"] == [1.0, 1.0, 1.0, 1.0]
    assert z["shape"] == [10**5, 10**5] and "storage" in z["partial"] and z["stats"][3] == 2 * 10**5 - 2
    assert z["samples"][0] == 0 and z["samples"][-1] == 2 * 10**5 - 2


def test_a_large_tensors_statistics_are_summed_pairwise():
    """2**25 values of 0.1: float32 vector_norm added them in turn (mean |x| 0.115, rms 0.101)."""
    f = fingerprint(torch.full((2**25,), 0.1))
    assert f["stats"] == pytest.approx([0.1] * 4, rel=1e-6)


@pytest.mark.parametrize(("make", "said"), [
    (lambda: torch.eye(3).to_sparse(), "a sparse_coo tensor is not fingerprinted"),
    (lambda: torch.empty(3, device="meta"), "a meta tensor has no values"),
])
def test_a_tensor_that_cannot_be_read_says_why(make, said):
    f = fingerprint(make())
    assert said in f["unreadable"] and "hash" not in f and json.loads(json.dumps(f)) == f


def test_unreadable_entries_are_counted_in_the_record():
    e = {"step": 0, "phase": "forward", "module": "enc", "what": "output", "call": 0, "class": "Enc",
         "fp": fingerprint(torch.eye(2).to_sparse())}
    rec = Record(steps={0: [e]}, step_lines={0: {}})
    assert rec.unreadable() == ["step 0, enc (Enc) output, call 0: a sparse_coo tensor is not fingerprinted"]


@pytest.mark.slow
def test_a_model_with_all_of_them_is_recorded_and_compared():
    """tests/fixtures/diff_odd.py: a conj output, a float8 buffer, a jagged batch and an
    expanded view of 10**9 values; two runs agree (before: 'the fingerprint recorder failed
    inside the job'), and another float8 buffer is named at step 0's input."""
    r = diff("--json", "--steps", "2", line("diff_odd.py"), line("diff_odd.py"))
    assert r.returncode == 0, r.stderr
    result = answer(r)
    assert result["first_divergence"] is None and result["unreadable"] == {"A": 0, "B": 0}
    assert result["fingerprints"]["A"] == result["fingerprints"]["B"] > 40
    r = diff("--json", line("diff_odd.py"), line("diff_odd.py", "--f8", "2"))
    assert r.returncode == 1, r.stderr
    d = answer(r)["first_divergence"]
    assert (d["step"], d["phase"], d["module"], d["what"]) == (0, "input", "", "gain8"), d
