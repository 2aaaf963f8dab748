"""The Tensor panel's `model.0.weight.grad` of a gradient that is None (issue 45's eighteenth
walk, 1): it said `model.0.weight has no attribute grad` (the Model panel's name is no Python,
so the name was looked up as the model's part, and `.grad` is none), while the REPL's
`p model[0].weight.grad` said why it is None. Both say the same now. A real job paused after
zero_grad (set_to_none), before its forward."""

from __future__ import annotations

import pytest
from conftest import paused_job

pytestmark = [pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(300)]

SCRIPT = """\
import torch
from torch import nn

model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    opt.zero_grad(set_to_none=True)
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    opt.step()
"""


def test_a_model_parts_grad_that_is_none_says_why(start_job, tmp_path):
    with paused_job(start_job, tmp_path, SCRIPT, "--break", "step==1") as (job, c):
        panel = c.summary("model.0.weight.grad")["words"]  # (the Model panel's name)
        python = c.summary("model[0].weight.grad")["words"]
        assert panel == python.replace("model[0].weight", "model.0.weight"), (panel, python)
        assert "is None: no gradient yet" in panel and "has no attribute" not in panel, panel
        c.end()
