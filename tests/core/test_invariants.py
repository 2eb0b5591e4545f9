"""Invariants of the core that every learner relies on: causality, memory equivalence, step(),
episode boundaries, padding, gating at init, no gradient into memory."""

from __future__ import annotations

import itertools

import pytest
import torch

from rlformer.core import CoreConfig, Memory, MemoryCore
from tests.core.reference import tolerance

SCHEMES = ["relative", "rotary", "learned", "none"]
BLOCKS = ["gtrxl", "trxl_i", "post_ln"]


def _core(device: torch.device, memory_length: int = 6, **kw: object) -> MemoryCore:
    torch.manual_seed(0)
    kw.setdefault("precision", "fp32")  # exact comparisons; bf16 has its own test
    cfg = CoreConfig(n_layers=2, d_model=16, n_heads=2, d_ff=32, memory_length=memory_length, **kw)
    core = MemoryCore(cfg).to(device).eval()
    for name, param in core.named_parameters():
        if "distance_bias" in name:
            torch.nn.init.normal_(param)
    return core


def _run_segments(
    core: MemoryCore, x: torch.Tensor, starts: torch.Tensor, size: int
) -> torch.Tensor:
    memory, outs = None, []
    for a in range(0, x.shape[1], size):
        out = core(x[:, a : a + size], memory, starts[:, a : a + size])
        memory, _ = out.memory, outs.append(out.output)
    return torch.cat(outs, 1)


def _run_steps(core: MemoryCore, x: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """``x [B, T, d]`` one token at a time through :meth:`MemoryCore.step` -> ``[B, T, d]``."""
    memory, outs = None, []
    for t in range(x.shape[1]):
        out = core.step(x[:, t], memory, starts[:, t])
        memory, _ = out.memory, outs.append(out.output)
    return torch.stack(outs, 1)


@pytest.mark.parametrize(("scheme", "block"), list(itertools.product(SCHEMES, BLOCKS)))
def test_causality(scheme: str, block: str, device: torch.device) -> None:
    core = _core(device, positional=scheme, block=block)
    x = torch.randn(2, 10, 16, device=device)
    changed = x.clone()
    changed[:, 6:] += torch.randn_like(changed[:, 6:])
    with torch.no_grad():
        a, b = core(x).output, core(changed).output
    torch.testing.assert_close(a[:, :6], b[:, :6], atol=tolerance(device), rtol=0)
    assert (a[:, 6:] - b[:, 6:]).abs().max() > 1e-3  # later outputs do change


@pytest.mark.parametrize(("scheme", "block"), list(itertools.product(SCHEMES, BLOCKS)))
@pytest.mark.parametrize("memory_length", [24, 5])
def test_segments_and_steps_equal_whole_sequence(
    scheme: str, block: str, memory_length: int, device: torch.device
) -> None:
    """M=24 covers the whole history; M=5 makes the sliding window bite. Both must agree."""
    core = _core(device, memory_length=memory_length, positional=scheme, block=block)
    x = torch.randn(3, 20, 16, device=device)
    starts = torch.zeros(3, 20, dtype=torch.bool, device=device)
    starts[1, 7] = starts[2, 13] = starts[2, 16] = True
    with torch.no_grad():
        whole = core(x, episode_start=starts).output
        segments = _run_segments(core, x, starts, size=6)
        steps = _run_steps(core, x, starts)
    torch.testing.assert_close(segments, whole, atol=tolerance(device), rtol=0)
    torch.testing.assert_close(steps, whole, atol=tolerance(device), rtol=0)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_memory_beyond_window_matches_sliding_window_reference(
    scheme: str, device: torch.device
) -> None:
    """One layer, M=4: output at t equals a fresh run on exactly the tokens t-4..t."""
    torch.manual_seed(3)
    cfg = CoreConfig(
        n_layers=1,
        d_model=16,
        n_heads=2,
        d_ff=32,
        memory_length=4,
        positional=scheme,
        precision="fp32",
    )
    core = MemoryCore(cfg).to(device).eval()
    x = torch.randn(2, 15, 16, device=device)
    with torch.no_grad():
        carried = _run_segments(core, x, torch.zeros(2, 15, dtype=torch.bool, device=device), 5)
        for t in range(15):
            window = x[:, max(0, t - 4) : t + 1]
            expected = core(window).output[:, -1]
            torch.testing.assert_close(carried[:, t], expected, atol=tolerance(device), rtol=0)


@pytest.mark.parametrize(("scheme", "block"), list(itertools.product(SCHEMES, BLOCKS)))
def test_episode_restart_equals_fresh_start(scheme: str, block: str, device: torch.device) -> None:
    """Rows restarting at different times behave exactly like new runs from that point."""
    core = _core(device, memory_length=8, positional=scheme, block=block)
    history = torch.randn(3, 7, 16, device=device)
    x = torch.randn(3, 9, 16, device=device)
    restart_at = [0, 3, 6]
    starts = torch.zeros(3, 9, dtype=torch.bool, device=device)
    for row, t in enumerate(restart_at):
        starts[row, t] = True
    with torch.no_grad():
        memory = core(history).memory  # full, valid memory of a previous episode
        out = core(x, memory, starts).output
        for row, t in enumerate(restart_at):
            fresh = core(x[row : row + 1, t:]).output
            torch.testing.assert_close(
                out[row : row + 1, t:], fresh, atol=tolerance(device), rtol=0
            )
        # And the earlier part of each row did use the old memory (the test can see a leak).
        without_memory = core(x[1:2, :3]).output
        assert (out[1:2, :3] - without_memory).abs().max() > 1e-3


@pytest.mark.parametrize("scheme", SCHEMES)
def test_padding_does_not_change_real_outputs(scheme: str, device: torch.device) -> None:
    core = _core(device, memory_length=12, positional=scheme)
    x = torch.randn(2, 8, 16, device=device)
    padding = torch.zeros(2, 8, dtype=torch.bool, device=device)
    padding[0, :3] = True  # left padding
    padding[1, 6:] = True  # right padding
    noisy = x.clone()
    noisy[padding] = 100 * torch.randn_like(noisy[padding])
    with torch.no_grad():
        a = core(x, padding_mask=padding)
        b = core(noisy, padding_mask=padding)
        unpadded_0 = core(x[0:1, 3:]).output
        unpadded_1 = core(x[1:2, :6]).output
    torch.testing.assert_close(
        a.output[~padding], b.output[~padding], atol=tolerance(device), rtol=0
    )
    torch.testing.assert_close(a.output[0:1, 3:], unpadded_0, atol=tolerance(device), rtol=0)
    torch.testing.assert_close(a.output[1:2, :6], unpadded_1, atol=tolerance(device), rtol=0)
    assert torch.isfinite(a.output).all() and (a.output[padding] == 0).all()
    # Padded slots never become valid memory.
    assert not a.memory.valid[1, -2:].any() and a.memory.valid[1, -3]


def test_gru_gate_starts_near_identity() -> None:
    from rlformer.core.gates import GRUGate

    torch.manual_seed(0)
    x, y = torch.randn(4096, 32), torch.randn(4096, 32)

    def deviation(bias: float) -> float:
        gate = GRUGate(32, bias)
        with torch.no_grad():
            return float((gate(x, y) - x).norm() / x.norm())

    # z = sigmoid(... - b_g) is about 0.12 at b_g = 2, so g moves x by a small fraction only.
    assert deviation(2.0) < 0.3
    assert deviation(2.0) < deviation(0.0) / 2
    assert deviation(4.0) < deviation(2.0)


@pytest.mark.parametrize("gate", ["gru", "input", "output", "highway", "sigmoid_tanh"])
def test_every_gate_trains(gate: str) -> None:
    core = _core(torch.device("cpu"), gate=gate)
    x = torch.randn(2, 5, 16)
    loss = core(x).output.pow(2).mean()
    loss.backward()
    grads = [p.grad for p in core.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_no_gradient_reaches_memory() -> None:
    core = _core(torch.device("cpu"))
    hidden = torch.randn(2, 2, 6, 16, requires_grad=True)
    memory = Memory(hidden, torch.ones(2, 6, dtype=torch.bool))
    out = core(torch.randn(2, 4, 16, requires_grad=True), memory)
    out.output.sum().backward()
    assert hidden.grad is None
    assert not out.memory.hidden.requires_grad


def test_step_cost_is_linear_in_memory() -> None:
    """step() attends one query to M+1 keys: the attention mask it builds is [B, 1, M+1]."""
    from rlformer.core.masks import build_layout

    layout = build_layout(torch.ones(2, 256, dtype=torch.bool), None, None, seg_len=1)
    assert layout.visible.shape == (2, 1, 257)


@pytest.mark.gpu
@pytest.mark.parametrize("scheme", SCHEMES)
def test_bf16_autocast_on_cuda_stays_close_to_fp32(scheme: str) -> None:
    fp32 = _core(torch.device("cuda"), positional=scheme)
    bf16 = _core(torch.device("cuda"), positional=scheme, precision="auto")
    x = torch.randn(4, 12, 16, device="cuda")
    with torch.no_grad():
        a, b = fp32(x).output, bf16(x).output
    assert b.dtype == torch.float32
    assert (a - b).abs().max() < 0.1
    assert torch.isfinite(b).all()


def test_ppo_models_default_to_fp32_but_respect_a_choice() -> None:
    from rlformer.config import ModelConfig

    assert ModelConfig().core.precision == "fp32"
    assert ModelConfig.model_validate({"core": {"n_layers": 1}}).core.precision == "fp32"
    assert ModelConfig.model_validate({"core": {"precision": "auto"}}).core.precision == "auto"
    assert CoreConfig().precision == "auto"


@pytest.mark.parametrize("scheme", SCHEMES)
def test_two_layers_match_a_fresh_run_on_their_receptive_field(
    scheme: str, device: torch.device
) -> None:
    """L layers with window M: output t depends on exactly tokens t - L*M .. t.

    A fresh run on just those L*M + 1 tokens computes every intermediate its output needs with a
    full window, so it must match the carried-memory run exactly once the window bites.
    (trxl_i blocks: a GTrXL at init passes two-hop influence through near-closed gates, ~1e-4.)
    """
    core = _core(device, memory_length=3, positional=scheme, block="trxl_i")
    reach = core.cfg.n_layers * core.cfg.memory_length
    x = torch.randn(2, 16, 16, device=device)
    no_starts = torch.zeros(2, 16, dtype=torch.bool, device=device)
    with torch.no_grad():
        carried = _run_segments(core, x, no_starts, size=5)
        for t in range(16):
            expected = core(x[:, max(0, t - reach) : t + 1]).output[:, -1]
            torch.testing.assert_close(carried[:, t], expected, atol=tolerance(device), rtol=0)
        # The receptive field is exactly L*M: token t - L*M still matters, t - L*M - 1 does not.
        last = x.shape[1] - 1
        for offset, matters in ((reach, True), (reach + 1, False)):
            poked = x.clone()
            poked[:, last - offset] += torch.randn_like(poked[:, 0])  # not a constant: LN drops it
            change = (core(poked).output[:, -1] - carried[:, -1]).abs().max()
            assert (change > 1e-3) if matters else (change < tolerance(device)), offset


def test_fully_padded_row_is_inert(device: torch.device) -> None:
    """An all-padding row (an idle env slot) outputs zeros and leaves other rows unchanged."""
    core = _core(device, memory_length=4)
    x = torch.randn(3, 5, 16, device=device)
    padding = torch.zeros(3, 5, dtype=torch.bool, device=device)
    padding[1] = True
    with torch.no_grad():
        memory = core(torch.randn(3, 4, 16, device=device)).memory
        out = core(x, memory, padding_mask=padding)
        alone = core(x[[0, 2]], memory.index(torch.tensor([0, 2], device=device)))
    assert (out.output[1] == 0).all()
    torch.testing.assert_close(out.output[[0, 2]], alone.output, atol=tolerance(device), rtol=0)
    assert not out.memory.valid[1].any()  # four padded tokens pushed all old slots out


def test_dropout_only_in_training_mode() -> None:
    core = _core(torch.device("cpu"), dropout=0.5)
    x = torch.randn(2, 6, 16)
    core.train()
    a, b = core(x).output, core(x).output
    assert (a - b).abs().max() > 1e-3
    core.eval()
    torch.testing.assert_close(core(x).output, core(x).output, atol=0, rtol=0)


@pytest.mark.slow
def test_compiled_core_matches_eager() -> None:
    """`compile: true` wraps the same forward in torch.compile (minutes of codegen on CPU)."""
    eager = _core(torch.device("cpu"))
    compiled = MemoryCore(eager.cfg.model_copy(update={"compile": True})).eval()
    compiled.load_state_dict(eager.state_dict())
    x = torch.randn(2, 6, 16)
    starts = torch.zeros(2, 6, dtype=torch.bool)
    starts[1, 2] = True
    with torch.no_grad():
        a, b = eager(x, episode_start=starts), compiled(x, episode_start=starts)
    torch.testing.assert_close(b.output, a.output, atol=1e-5, rtol=0)
    torch.testing.assert_close(b.memory.hidden, a.memory.hidden, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("scheme", "block"), list(itertools.product(SCHEMES, BLOCKS)))
def test_selected_outputs_equal_the_full_outputs(
    scheme: str, block: str, device: torch.device
) -> None:
    """``output_index`` (the last layer computes only some queries) changes nothing else."""
    core = _core(device, memory_length=7, positional=scheme, block=block)
    x = torch.randn(3, 12, 16, device=device)
    starts = torch.zeros(3, 12, dtype=torch.bool, device=device)
    starts[1, 5] = True
    padding = torch.zeros(3, 12, dtype=torch.bool, device=device)
    padding[2, 9:] = True
    index = torch.arange(1, 12, 3, device=device)
    with torch.no_grad():  # produced in inference, so its keys/values are cached
        memory = core(torch.randn(3, 6, 16, device=device)).memory
    for grad in (False, True):  # True: the training path; False: inference with the K/V cache
        if not grad:
            assert core._cached_projections(memory) is not None
        with torch.set_grad_enabled(grad):
            full = core(x, memory, starts, padding)
            part = core(x, memory, starts, padding, output_index=index)
        tol = tolerance(device)
        torch.testing.assert_close(part.output, full.output[:, index], atol=tol, rtol=0)
        torch.testing.assert_close(part.memory.hidden, full.memory.hidden, atol=tol, rtol=0)
        assert torch.equal(part.memory.valid, full.memory.valid)


@pytest.mark.parametrize("encoding", ["learned", "sinusoidal"])
@pytest.mark.parametrize("memory_length", [24, 5])
def test_episode_clock_keeps_whole_segment_step_and_restart_equal(
    memory_length: int, encoding: str, device: torch.device
) -> None:
    """The clock is read off the visibility mask, so every way of processing agrees."""
    core = _core(
        device,
        memory_length=memory_length,
        episode_clock=True,
        episode_clock_encoding=encoding,
    )
    torch.nn.init.normal_(core.episode_clock.weight)  # loud, so a wrong count shows
    x = torch.randn(3, 20, 16, device=device)
    starts = torch.zeros(3, 20, dtype=torch.bool, device=device)
    starts[1, 7] = starts[2, 13] = starts[2, 16] = True
    with torch.no_grad():
        whole = core(x, episode_start=starts).output
        segments = _run_segments(core, x, starts, size=6)
        steps = _run_steps(core, x, starts)
        fresh = core(x[1:2, 7:]).output  # row 1 restarts at t = 7
    atol = tolerance(device)
    torch.testing.assert_close(segments, whole, atol=atol, rtol=0)
    torch.testing.assert_close(steps, whole, atol=atol, rtol=0)
    torch.testing.assert_close(whole[1:2, 7:], fresh, atol=atol, rtol=0)


@pytest.mark.parametrize("encoding", ["learned", "sinusoidal"])
def test_episode_clock_tells_steps_apart_up_to_the_window(
    encoding: str, device: torch.device
) -> None:
    """Identical tokens without positions look the same at every step; with the clock they
    differ while the window fills (M = 5 earlier tokens), then the clock stays at M: two layers
    see 2M tokens back, so from step 2M on the outputs stop changing."""
    x = torch.ones(1, 14, 16, device=device)
    with torch.no_grad():
        plain = _core(device, memory_length=5, positional="none")(x).output[0]
        timed = _core(
            device,
            memory_length=5,
            positional="none",
            episode_clock=True,
            episode_clock_encoding=encoding,
        )
        torch.nn.init.normal_(timed.episode_clock.weight)
        clocked = timed(x).output[0]
    torch.testing.assert_close(plain, plain[:1].expand_as(plain), atol=1e-5, rtol=0)
    gaps = [(clocked[t] - clocked[t + 1]).abs().max().item() for t in range(13)]
    assert min(gaps[:5]) > 0.1, gaps  # steps 0..5 all differ
    assert max(gaps[10:]) < 1e-3, (
        gaps
    )  # steps 10..13: the same clock all the way back (float noise)


def test_sinusoidal_clock_saves_only_its_map() -> None:
    """The sinusoid is rebuilt from the config, so a checkpoint holds the learned map alone."""
    core = _core(torch.device("cpu"), episode_clock=True, episode_clock_encoding="sinusoidal")
    keys = [key for key in core.state_dict() if key.startswith("episode_clock")]
    assert keys == ["episode_clock.weight"]
    assert core.episode_clock.weight.shape == (16, 16)
