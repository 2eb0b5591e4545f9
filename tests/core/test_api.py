"""The small API around the core: Memory helpers, config validation, devices and precision."""

from __future__ import annotations

import pydantic
import pytest
import torch

from rlformer.core import CoreConfig, Memory, MemoryCore
from rlformer.core.device import autocast_context, resolve_device


def _memory(batch: int, seed: int) -> Memory:
    generator = torch.Generator().manual_seed(seed)
    return Memory(
        torch.randn(2, batch, 3, 4, generator=generator),
        torch.rand(batch, 3, generator=generator) < 0.5,
    )


def test_initial_memory_is_empty() -> None:
    core = MemoryCore(CoreConfig(n_layers=3, d_model=8, n_heads=2, d_ff=8, memory_length=5))
    memory = core.initial_memory(4)
    assert memory.hidden.shape == (3, 4, 5, 8) and memory.valid.shape == (4, 5)
    assert not memory.valid.any() and not memory.hidden.any()
    assert memory.hidden.device == next(core.parameters()).device


def test_index_and_cat_are_inverse() -> None:
    a, b = _memory(2, 0), _memory(3, 1)
    joined = Memory.cat([a, b])
    assert joined.batch_size == 5
    for part, rows in ((a, torch.tensor([0, 1])), (b, torch.tensor([2, 3, 4]))):
        picked = joined.index(rows)
        assert torch.equal(picked.hidden, part.hidden) and torch.equal(picked.valid, part.valid)


def test_reset_invalidates_only_the_chosen_rows() -> None:
    memory = Memory(torch.randn(2, 3, 3, 4), torch.ones(3, 3, dtype=torch.bool))
    reset = memory.reset(torch.tensor([False, True, False]))
    assert reset.valid.tolist() == [[True] * 3, [False] * 3, [True] * 3]
    assert torch.equal(reset.hidden, memory.hidden)


def test_reset_memory_equals_empty_memory_for_outputs() -> None:
    """Invalid slots are never read: a reset row behaves like a fresh one, whatever it holds."""
    torch.manual_seed(0)
    core = MemoryCore(CoreConfig(d_model=8, n_heads=2, d_ff=16, memory_length=4)).eval()
    x = torch.randn(2, 3, 8)
    with torch.no_grad():
        used = core(torch.randn(2, 5, 8)).memory
        out_reset = core(x, used.reset(torch.tensor([True, True]))).output
        out_fresh = core(x).output
    torch.testing.assert_close(out_reset, out_fresh, atol=1e-6, rtol=0)


def test_to_and_detach_keep_contents() -> None:
    memory = _memory(2, 2)
    moved = memory.to("cpu").detach()
    assert torch.equal(moved.hidden, memory.hidden) and torch.equal(moved.valid, memory.valid)


@pytest.mark.parametrize(
    "bad",
    [
        {"positional": "alibi"},
        {"block": "gated"},
        {"gate": "lstm"},
        {"n_layers": 0},
        {"memory_length": 0},
        {"dropout": 1.0},
        {"d_model": 10, "n_heads": 4},
        {"d_model": 6, "n_heads": 2, "positional": "rotary"},
        {"memory_lenght": 8},
    ],
)
def test_bad_config_is_a_validation_error(bad: dict[str, object]) -> None:
    with pytest.raises(pydantic.ValidationError):
        CoreConfig(**bad)


def test_config_fields_are_documented_and_defaults_run() -> None:
    for name, field in CoreConfig.model_fields.items():
        assert field.description, f"{name} has no description"
    core = MemoryCore(CoreConfig())
    assert core(torch.randn(1, 2, CoreConfig().d_model)).output.shape == (1, 2, 64)


def test_resolve_device() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    with pytest.raises(ValueError):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="cuda"):
            resolve_device("cuda")


@pytest.mark.parametrize("name", ["cuda", "auto"])
def test_a_cuda_device_makes_cudnn_deterministic(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Picking CUDA turns on cuDNN's deterministic algorithms (a resumed run must repeat)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", False)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    assert resolve_device(name) == torch.device("cuda")
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark


def test_a_cpu_device_leaves_cudnn_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", False)
    resolve_device("cpu")
    assert not torch.backends.cudnn.deterministic


def test_autocast_is_off_on_cpu_by_default() -> None:
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with autocast_context(torch.device("cpu")):
        assert (a @ b).dtype == torch.float32


@pytest.mark.gpu
def test_autocast_is_bf16_on_cuda() -> None:
    a, b = torch.randn(4, 4, device="cuda"), torch.randn(4, 4, device="cuda")
    with autocast_context(torch.device("cuda")):
        assert (a @ b).dtype == torch.bfloat16
    with autocast_context(torch.device("cuda"), "fp32"):
        assert (a @ b).dtype == torch.float32


def test_memory_that_does_not_fit_is_a_clear_error() -> None:
    core = MemoryCore(CoreConfig(d_model=8, n_heads=2, d_ff=16, memory_length=4))
    other = MemoryCore(CoreConfig(d_model=8, n_heads=2, d_ff=16, memory_length=6))
    with pytest.raises(ValueError, match="memory_length"):
        core(torch.randn(2, 3, 8), other.initial_memory(2))
    with pytest.raises(ValueError, match="batch"):
        core(torch.randn(3, 3, 8), core.initial_memory(2))


def test_a_compiled_core_pickles() -> None:
    """Ray ships policies by pickle; the compiled function is rebuilt on the copy's first call."""
    import pickle

    core = MemoryCore(CoreConfig(d_model=8, n_heads=2, d_ff=16, memory_length=4, compile=True))
    copy = pickle.loads(pickle.dumps(core))
    for name, value in core.state_dict().items():
        assert torch.equal(copy.state_dict()[name], value)
