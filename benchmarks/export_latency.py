"""One-step latency of an exported GTrXL policy against PyTorch, on one CPU thread.

Four ways to take one ``act`` step with the same weights, each carrying its state from step to
step after the memory has filled up (steady state):

* ``Policy.act``: the eager :class:`ActorCriticPolicy` (numpy in and out, actor and critic);
* ``torch step``: the bare exported step module (:class:`ActorStep`, tensors in and out);
* ``torch.compile``: that module compiled by inductor (compile time not counted);
* ``onnxruntime``: the exported graph through the reference runner (numpy in and out) and as a
  bare ``session.run``.

The exported step (and so ``torch step``) carries the memory's attention keys and values as
state, as eager inference keeps them in the core's projection cache (policy format 2).

All with one thread (``torch.set_num_threads(1)``, onnxruntime ``intra_op_num_threads=1``), at
batch 1 and 64, for the GTrXL of the popgym preset and the same with memory_length 256::

    .venv/bin/python benchmarks/export_latency.py [--steps 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import onnxruntime
import torch

from rlformer.algos.ppo.export import ActorStep
from rlformer.algos.ppo.policy import ActorCriticPolicy
from rlformer.config import ModelConfig
from rlformer.config.presets import apply_preset
from rlformer.export.onnx_runner import OnnxPolicy
from rlformer.export.writer import export_policy
from rlformer.networks.actor_critic import ActorCritic
from rlformer.policies.base import PolicyInfo

OBSERVATION = gym.spaces.Box(-1.0, 1.0, (8,), np.float32)
ACTION = gym.spaces.Discrete(4)


def popgym_model(memory_length: int | None = None) -> ActorCritic:
    """The popgym preset's GTrXL (one layer, width 64) on an 8-dim observation, 4 actions."""
    raw = apply_preset({"preset": "popgym", "env": {"id": "popgym-RepeatPreviousEasy-v0"}})
    cfg = ModelConfig.model_validate(raw["model"])
    if memory_length is not None:
        cfg = cfg.model_copy(
            update={"core": cfg.core.model_copy(update={"memory_length": memory_length})}
        )
    torch.manual_seed(0)
    return ActorCritic(OBSERVATION, ACTION, cfg).eval()


def time_steps(step: Callable[[Any], Any], state: Any, warmup: int, steps: int) -> float:
    """Median microseconds of one call, the state carried from call to call."""
    for _ in range(warmup):
        state = step(state)
    times = []
    for _ in range(steps):
        begin = time.perf_counter()
        state = step(state)
        times.append(time.perf_counter() - begin)
    return statistics.median(times) * 1e6


def measure(model: ActorCritic, batch: int, steps: int, compile_step: bool) -> dict[str, float]:
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (batch, 8)).astype(np.float32)
    not_start = np.zeros(batch, dtype=bool)
    warmup = model.actor_torso.core.cfg.memory_length + 10  # fill the memory first
    policy = ActorCriticPolicy(model, PolicyInfo("bench", "ppo"))
    results = {
        "Policy.act": time_steps(
            lambda s: policy.act(obs, s, not_start)[1], policy.initial_state(batch), warmup, steps
        )
    }
    step = ActorStep(model)
    given = {"obs": torch.as_tensor(obs), "episode_start": torch.as_tensor(not_start)}
    inputs = [given.get(s.name, s.example(batch)) for s in step.inputs if s.role != "state"]
    inputs = [torch.ones_like(x) if x.dtype == torch.bool and x.dim() == 2 else x for x in inputs]
    state = [spec.example(batch) for spec in step.states]
    n_states = len(state)

    def run_module(module: Callable[..., Any]) -> Callable[[Any], Any]:
        def one(s: list[torch.Tensor]) -> list[torch.Tensor]:
            with torch.no_grad():
                return list(module(*inputs, *s)[-n_states:])

        return one

    results["torch step"] = time_steps(run_module(step), state, warmup, steps)
    if compile_step:
        try:
            compiled = torch.compile(step, dynamic=False)
            results["torch.compile"] = time_steps(run_module(compiled), state, warmup, steps)
        except Exception as err:  # noqa: BLE001 - report and go on
            print(f"torch.compile failed: {type(err).__name__}: {err}")
    with tempfile.TemporaryDirectory() as folder:
        export_policy(policy, folder)
        runner = OnnxPolicy(folder, threads=1)
    results["onnxruntime (runner)"] = time_steps(
        lambda s: runner.act(obs, s, not_start)[1], runner.initial_state(batch), warmup, steps
    )
    names = [spec["name"] for spec in runner.meta["outputs"]]
    feed = {
        spec.name: value.numpy()
        for spec, value in zip((s for s in step.inputs if s.role != "state"), inputs, strict=True)
    }

    def bare(s: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = dict(zip(names, runner.session.run(names, {**feed, **s}), strict=True))
        return {name: out[f"next_{name}"] for name in s}

    results["onnxruntime (session.run)"] = time_steps(
        bare, runner.initial_state(batch), warmup, steps
    )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="timed steps per measurement")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, 1 thread each; "
        f"median of the per-step times (us); {os.cpu_count()} cores, load average {load} "
        "(on a shared machine compare the ratios, not the absolute times)"
    )
    rows = []
    for label, memory in (("popgym preset (M=64)", None), ("popgym preset, M=256", 256)):
        model = popgym_model(memory)
        for batch in (1, 64):
            results = measure(model, batch, args.steps, not args.no_compile)
            rows.append((label, batch, results))
    columns = list(rows[0][2])
    header = f"{'model':<22} {'batch':>5} " + " ".join(f"{c:>26}" for c in columns)
    print(header)
    for label, batch, results in rows:
        base = results["Policy.act"]
        cells = [
            f"{results[c]:>10.0f} ({base / results[c]:4.1f}x)" if c in results else "n/a"
            for c in columns
        ]
        print(f"{label:<22} {batch:>5} " + " ".join(f"{cell:>26}" for cell in cells))
    print("(Nx) = speed-up over Policy.act.")


if __name__ == "__main__":
    main()
