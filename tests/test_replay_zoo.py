"""The replay against real models (issue 13's zoo): PyTorch's own transformer modules, HF
GPT-2, an LSTM, a CNN with BatchNorm, masked pooling; the NaN or inf is made somewhere
other than the first block, or in the data, the loss, the backward, or by a learning rate
far too high. Each case names the producer (module instance, op, line) and the advice class.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from stepdbg.agent.measure.frames import OWN_DIR


def line_of(fn, marker: str) -> int:
    src, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(src) if marker in line)


class LogAct(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x)  # @log-act


class SqrtAct(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(x)  # @sqrt-act


def train(s, model: nn.Module, batches, loss_fn=None, lr: float = 1e-3, opt_cls=torch.optim.Adam) -> dict:
    """A plain loop until the first replay; that replay's answer."""
    opt = opt_cls(model.parameters(), lr=lr)
    loss_fn = loss_fn or (lambda out, y: F.mse_loss(out, y))
    for x, y in batches:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if s.views.replays:
            return s.views.replays[0]
    raise AssertionError(f"no replay; breaks: {s.breaks}")


def expect(replay: dict, where: str, module: str | None, op: str | None, cause: str, line: int | None = None) -> None:
    first = replay["first_nonfinite"]
    assert first is not None, replay["summary"]
    assert (first["where"], first["module"], first["op"]) == (where, module, op), replay["summary"]
    if line is not None:
        assert first["line"] == line, first
    assert replay["advice"]["cause"] == cause, replay["advice"]
    assert OWN_DIR not in " ".join(first.get("forward_trace", [])), first  # never our own frames


@pytest.fixture
def replayer(session_factory):
    torch.manual_seed(0)
    s = session_factory("nan", actions=("replay",))
    s.model.armed = True
    return s


def test_transformer_encoder_with_a_causal_mask(replayer):
    """nn.TransformerEncoder and generate_square_subsequent_mask: the -inf above the diagonal
    is intended; the log in layer 1's feed-forward makes the NaN."""
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), 3)
    enc.layers[1].activation = LogAct()
    mask = nn.Transformer.generate_square_subsequent_mask(6)

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.enc = enc
            self.head = nn.Linear(16, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.enc(x, mask=mask, is_causal=True))

    batches = [(torch.randn(4, 6, 16), torch.randn(4, 6, 1)) for _ in range(3)]
    r = train(replayer, Model(), batches)
    expect(r, "forward", "enc.layers.1.activation", "log", "domain", line_of(LogAct.forward, "# @log-act"))


def test_multihead_attention_with_an_all_masked_row(replayer):
    """nn.MultiheadAttention with key_padding_mask: a row with every key masked is NaN after
    softmax; the masks of block 0 are absorbed and never blamed."""

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
            return x + self.attn(x, x, x, key_padding_mask=pad)[0]

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList([Block(), Block()])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            pad = torch.zeros(x.shape[0], x.shape[1], dtype=torch.bool)
            pad[:, -1] = True  # padding, as every batch has
            all_masked = pad.clone()
            all_masked[1] = True  # sample 1 is all padding: nothing to attend to
            return self.blocks[1](self.blocks[0](x, pad), all_masked).mean(-1, keepdim=True)

    r = train(replayer, Model(), [(torch.randn(3, 5, 8), torch.randn(3, 5, 1))])
    first = r["first_nonfinite"]
    assert (first["where"], first["module"]) == ("forward", "blocks.1.attn")
    # F.multi_head_attention_forward is one op to a TorchFunctionMode: the softmax runs inside it
    assert first["op"] in ("softmax", "scaled_dot_product_attention", "multi_head_attention_forward")
    assert r["advice"]["cause"] == "domain"
    assert "masked" in r["advice"]["text"]


class GPTBlock(nn.Module):
    """A minGPT/nanoGPT block: masked_fill(-inf) before softmax, or SDPA with is_causal."""

    def __init__(self, sdpa: bool) -> None:
        super().__init__()
        self.sdpa = sdpa
        self.ln_1, self.ln_2 = nn.LayerNorm(16), nn.LayerNorm(16)
        self.c_attn, self.c_proj = nn.Linear(16, 48), nn.Linear(16, 16)
        self.mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))
        self.register_buffer("bias", torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, 2, C // 2).transpose(1, 2) for t in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp(self.ln_2(x))


@pytest.mark.parametrize("sdpa", [False, True], ids=["masked_fill", "sdpa"])
def test_gpt_style_blocks(replayer, sdpa):
    blocks = nn.Sequential(*[GPTBlock(sdpa) for _ in range(3)])
    blocks[2].mlp[1] = SqrtAct()
    batches = [(torch.randn(2, 8, 16), torch.randn(2, 8, 16)) for _ in range(3)]
    r = train(replayer, blocks, batches)
    expect(r, "forward", "2.mlp.1", "sqrt", "domain", line_of(SqrtAct.forward, "# @sqrt-act"))


def test_hf_gpt2_from_a_config(replayer):
    """HF GPT2LMHeadModel from a small config (no hub): its loss is computed inside the model."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=3, n_embd=32, n_head=2, vocab_size=64, n_positions=16,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(cfg)
    model.transformer.h[2].mlp.act = SqrtAct()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(3):
        ids = torch.randint(0, 64, (2, 12))
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        if replayer.views.replays:
            break
    expect(replayer.views.replays[0], "forward", "transformer.h.2.mlp.act", "sqrt", "domain")


def test_lstm_language_model_nan_born_in_backward(replayer):
    """A norm of padded (exactly zero) LSTM states: finite forward, inf gradient at 0."""

    class PadNorm(nn.Module):
        def forward(self, h: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
            return torch.sqrt(((h * keep) ** 2).sum(-1, keepdim=True))  # @pad-norm

    class LM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(20, 8)
            self.rnn1, self.rnn2 = nn.LSTM(8, 8, batch_first=True), nn.LSTM(8, 8, batch_first=True)
            self.norm = PadNorm()
            self.head = nn.Linear(9, 20)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            h = self.rnn2(self.rnn1(self.emb(ids))[0])[0]
            keep = (ids != 0).unsqueeze(-1).float()
            return self.head(torch.cat([h, self.norm(h, keep)], -1))

    ids = torch.randint(1, 20, (2, 6))
    ids[1, 4:] = 0  # padding
    loss_fn = lambda out, y: F.cross_entropy(out.reshape(-1, 20), y.reshape(-1))  # noqa: E731
    r = train(replayer, LM(), [(ids, ids)], loss_fn)
    expect(r, "backward", "norm", "sqrt", "domain", line_of(PadNorm.forward, "# @pad-norm"))


def test_repeated_blocks_backward_is_the_block_that_made_it(replayer):
    """Three identical blocks; only block 2 meets sqrt at 0. Blocks share a source line, so a
    file-and-line mapping would name block 0."""

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.sqrt(self.fc(x) ** 2)  # @block-sqrt

    model = nn.Sequential(Block(), Block(), Block(), nn.Linear(4, 1))
    with torch.no_grad():
        model[2].fc.weight[0].zero_()
        model[2].fc.bias[0] = 0.0
    r = train(replayer, model, [(torch.randn(8, 4), torch.randn(8, 1))])
    expect(r, "backward", "2", "sqrt", "domain", line_of(Block.forward, "# @block-sqrt"))


def test_cnn_with_batchnorm(replayer):
    def block(act: nn.Module) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), act)

    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), block(nn.ReLU()), block(nn.ReLU()), block(LogAct()),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))
    stats = {n: b.clone() for n, b in model.named_buffers()}
    r = train(replayer, model, [(torch.randn(4, 1, 8, 8), torch.randn(4, 2))])
    expect(r, "forward", "3.2", "log", "domain")
    changed = [n for n, b in model.named_buffers() if "num_batches" not in n and torch.equal(b, stats[n])]
    assert changed == [], "the real step's BatchNorm update is kept (the replay put its own back)"


def test_masked_mean_pooling_of_an_empty_sequence(replayer):
    class Pool(nn.Module):
        def forward(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return (h * mask).sum(1) / mask.sum(1)  # @pool-div

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8))
            self.pool = Pool()
            self.head = nn.Linear(8, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            mask = (x.abs().sum(-1, keepdim=True) > 0).float()
            return self.head(self.pool(self.enc(x), mask))

    x = torch.randn(3, 5, 4)
    x[2] = 0.0  # an empty sequence: every position is padding
    r = train(replayer, Model(), [(x, torch.randn(3, 1))])
    expect(r, "forward", "pool", "div", "domain", line_of(Pool.forward, "# @pool-div"))


def test_nan_in_a_dataloader_batch_names_the_sample(replayer):
    from torch.utils.data import DataLoader, TensorDataset

    x = torch.randn(64, 4)
    x[37, 2] = float("nan")  # a corrupt record
    loader = DataLoader(TensorDataset(x, torch.randn(64, 1)), batch_size=8)
    r = train(replayer, nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)), loader)
    first = r["first_nonfinite"]
    # named as the loop names it (`for x, y in loader`), stepdbg's own name kept in "as"
    assert (first["where"], first["tensor"], first["as"], first["index"], first["count"]) == (
        "input", "x", "batch[0]", [5, 2], 1)
    assert first["sample"] == 37 and r["advice"]["cause"] == "data" and "37" in r["advice"]["text"]


def test_nan_in_a_get_batch_tensor(replayer):
    def batches():
        for step in range(4):
            x = torch.randn(8, 4)
            if step == 2:
                x[3, 1] = float("inf")
            yield x, torch.randn(8, 1)

    r = train(replayer, nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)), batches())
    first = r["first_nonfinite"]
    assert (first["where"], first["tensor"], first["as"], first["index"]) == ("input", "x", "batch", [3, 1])
    assert r["advice"]["cause"] == "data"


def test_a_target_too_large_for_float32_is_data(replayer):
    y = torch.full((8, 1), 1e30) * 1e10  # a target of 1e40: inf in float32
    r = train(replayer, nn.Linear(4, 1), [(torch.randn(8, 4), y)])
    first = r["first_nonfinite"]
    assert first["where"] == "input" and "target" in first["tensor"] and r["advice"]["cause"] == "data"


def test_a_learning_rate_far_too_high_is_called_divergence(replayer):
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    batches = [(torch.randn(16, 4), torch.randn(16, 1) * 10) for _ in range(60)]
    r = train(replayer, model, batches, lr=1e4, opt_cls=torch.optim.SGD)
    assert r["advice"]["cause"] == "divergence", (r["summary"], r["advice"])
    assert "learning rate" in r["advice"]["text"]


@pytest.mark.parametrize("one_read", [False, True], ids=["cpu", "as-on-a-gpu"])
def test_blown_up_transformer_weights_name_the_encoder_that_ran_first(session_factory, one_read):
    """Lightning's demo Transformer (nn.Transformer inside) with every weight matrix times
    1e20: the encoder's and the decoder's self-attention each make a NaN of their own. The
    producer is the first in execution order, the encoder's, for the activation watch (which
    breaks in the forward) and for the replay (which follows the NaN back from the output).
    As on a GPU (one_read: the output's sum stays on the device and comes back with the
    loss, in one read before the backward, the replay being armed) the answers are the same."""
    from lightning.pytorch.demos import Transformer

    torch.manual_seed(0)
    s = session_factory("activations", "nan", actions=("replay",))
    s.model.defer_reads = one_read
    model = Transformer(vocab_size=100, ninp=32, nhead=2, nhid=64, nlayers=2)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(1e20)
    x, y = torch.randint(0, 100, (4, 8)), torch.randint(0, 100, (4, 8))
    F.nll_loss(model(x, y), y.view(-1)).backward()
    watch, nan = s.breaks
    assert (watch.condition, watch.phase, watch.details["module"]) == (
        "activations", "forward", "transformer.encoder.layers.0.self_attn")
    for replay in s.views.replays:
        assert replay["first_nonfinite"]["module"] == "transformer.encoder.layers.0.self_attn", replay["summary"]


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(16, 48)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).view(2, 8, 3, 2, 8).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v)  # @sdpa


def test_the_replay_runs_the_kernels_the_step_ran(session_factory):
    """The step's forward runs inside sdpa_kernel(MATH); the pause (before backward) is
    outside it. The replay runs the math kernel again, not the CPU flash kernel that would
    be picked at the pause: the autograd node it names is the one the real step made."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)
    s = session_factory("nan", actions=("replay",))
    model = Attention()
    with torch.no_grad():
        model.qkv.weight.mul_(1e20)  # the scores overflow: the attention makes the NaN
    real: list[str] = []
    model.register_forward_hook(lambda m, a, out: real.append(out.grad_fn.name()))
    with sdpa_kernel(SDPBackend.MATH):
        out = model(torch.randn(2, 8, 16))
    out.sum().backward()
    first = s.views.replays[0]["first_nonfinite"]
    assert (first["op"], first["line"]) == ("scaled_dot_product_attention", line_of(Attention.forward, "# @sdpa"))
    assert first["node"] == real[0] == "UnsafeViewBackward0"  # the math kernel's, not ScaledDotProductFlashAttentionForCpu's


def test_the_replay_runs_under_the_steps_autocast(session_factory):
    """An fp16 overflow under CPU autocast: 16 * 300 * 300 > 65504. In float32 the same
    forward is finite; the replay runs in the step's autocast and finds the Linear."""
    s = session_factory("nan", actions=("replay",))
    model = nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 1))
    with torch.no_grad():
        model[0].weight.fill_(300.0)
        model[1].weight.fill_(-1.0)
    with torch.autocast("cpu", dtype=torch.float16):
        out = model(torch.full((2, 16), 300.0))
    assert not torch.isfinite(out).all()
    out.float().sum().backward()
    first = s.views.replays[0]["first_nonfinite"]
    assert (first["where"], first["module"], first["op"]) == ("forward", "0", "linear"), s.views.replays[0]["summary"]
    advice = s.views.replays[0]["advice"]["text"]  # the dtype it overflowed, and float32 said only where it helps
    assert "overflowed the float16 range" in advice and advice.endswith("compute it in float32 (keep it out of autocast)")


def test_an_overflow_in_float32_does_not_advise_float32(session_factory):
    s = session_factory("nan", actions=("replay",))
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
    with torch.no_grad():
        model[0].weight.fill_(1.0)
    model(torch.full((2, 4), 1e38)).sum().backward()  # finite inputs; four of them summed pass 3.4e38
    advice = s.views.replays[0]["advice"]["text"]
    assert "overflowed the float32 range" in advice and "compute it in float32" not in advice, advice
