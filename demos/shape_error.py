"""docs/failures.md row 8: a shape mismatch crashes deep in a model.

A flatten uses the wrong dimension, so the classifier's Linear gets 8x64 instead of
64x8 features: "mat1 and mat2 shapes cannot be multiplied". The post-mortem pause
shows the frame, the shape of every tensor local and the failing module.

    stepdbg --break exception --on-break pause python demos/shape_error.py
"""

import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 8, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Linear(8 * 16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.encoder(x)  # (batch, 8, 16)
        flat = h.reshape(h.shape[1], -1)  # wrong: should be h.reshape(h.shape[0], -1)
        return self.head(flat)  # @shape-crash


def main() -> None:
    torch.manual_seed(0)
    model = Classifier()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 4, 16), torch.randint(0, 10, (32,))
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
