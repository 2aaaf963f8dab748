"""The gradient an armed replay keeps of the model's output (backward_capture.keep_output_grad)
is the captured forward's own: a GAN's netG output gradient, which netD's backward reaches
after the capture moved to netD, does not overwrite netD's; of two forwards summed into one
backward, the capture's (the last) is kept; a model that returns a parameter holds one hook."""

from __future__ import annotations

import torch
from torch import nn


def test_a_gans_capture_keeps_netDs_output_gradient_not_netGs(session_factory):
    s = session_factory(actions=("replay",))
    torch.manual_seed(0)
    netG, netD = nn.Sequential(nn.Linear(3, 5), nn.Tanh()), nn.Linear(5, 1)
    opt_d, opt_g = torch.optim.SGD(netD.parameters(), lr=0.01), torch.optim.SGD(netG.parameters(), lr=0.01)
    bce = nn.BCEWithLogitsLoss()
    for _ in range(2):
        fake = netG(torch.randn(4, 3))
        opt_d.zero_grad()
        (bce(netD(torch.randn(4, 5)), torch.ones(4, 1)) + bce(netD(fake.detach()), torch.zeros(4, 1))).backward()
        opt_d.step()
        opt_g.zero_grad()
        out = netD(fake)
        seen = {}
        out.register_hook(lambda g, seen=seen: seen.setdefault("g", g.detach().clone()))
        bce(out, torch.ones(4, 1)).backward()
        opt_g.step()
        assert s.model.capture["root"]() is netD
        kept = s.model.capture["grad_output"]
        assert kept is not None and kept.shape == out.shape == (4, 1), kept.shape  # netG's is (4, 5)
        assert torch.equal(kept, seen["g"])


def test_two_forwards_in_one_backward_keep_the_captured_forwards_gradient(session_factory):
    s = session_factory(actions=("replay",))
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(2):
        opt.zero_grad()
        first, second = model(torch.randn(4, 3)), model(torch.randn(4, 3))
        seen = {}
        second.register_hook(lambda g, seen=seen: seen.setdefault("g", g.detach().clone()))
        ((first * 3).sum() + (second * 5).sum()).backward()  # the first's node runs last
        opt.step()
        assert torch.equal(s.model.capture["grad_output"], seen["g"]) and bool((seen["g"] == 5).all())


def test_a_model_that_returns_its_parameter_holds_one_hook_however_many_steps(session_factory):
    class Prompt(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.randn(4, 3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.weight

    s = session_factory(actions=("replay",))
    model = Prompt()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(20):
        opt.zero_grad()
        (model(torch.randn(2)) ** 2).sum().backward()
        opt.step()
    assert len(model.weight._backward_hooks) == 1  # one a step before
    assert s.model.capture["grad_output"].shape == (4, 3)
