"""Decision Transformer: rlformer vs Hugging Face transformers' DecisionTransformerModel vs BC.

Run (needs the bench extra: `pip install -e ".[bench]"`):
    .venv/bin/python benchmarks/dt.py --dataset data/hopper_medium.hdf5 \
        --env Hopper-v5 --target 3600
    .venv/bin/python benchmarks/dt.py --quick       # records small datasets itself
    .venv/bin/python benchmarks/dt.py --ablations   # where rlformer's training time goes
    python3 benchmarks/dt.py --quick --device cuda  # training on a GPU (bf16 autocast for all)
    .venv/bin/python benchmarks/dt.py --images minatar nature   # image observations

All three learners train in this one process with the same loop (same windows from the same
sampler, fused AdamW as in rlformer's DT learner, warm-up, gradient clipping, batch, steps) and
equal width/depth (3 layers, 1 head, d_model 128, dropout 0.1, K = 20; BC is a 3-layer MLP of
width 128 on the current state). The three train in turns of 20 steps, so machine load hits
them alike. On CUDA every learner trains under the same bf16 autocast (rlformer's core applies
it itself there); evaluation runs on CPU, as rlformer's DT trainer evaluates.
Printed: training samples/s (windows per second), the ratio to transformers' model, and the
final evaluation return (return-conditioned for the DTs).

``--images`` times training on image observations instead (speed only, no evaluation), on
synthetic data of the given shape with Discrete actions: ``minatar`` is 10x10x4 bool grids read
by rlformer's ``dt.cnn: minatar`` encoder, ``nature`` is 84x84x4 uint8 Atari-shaped frames read
by the Nature CNN (``dt.cnn: nature``). transformers' model gets the same CNN (rlformer's
encoder class, same size, trained end to end with it), whose features are its ``states``.
Besides samples/s over all rounds (as for vectors) it prints the median round's rate.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import rlformer_envs  # noqa: F401
import torch
from torch import nn

from rlformer.algos.dt.algorithm import normalized_actions
from rlformer.algos.dt.evaluation import run_return_conditioned
from rlformer.algos.dt.loading import build_dt, dt_encoder
from rlformer.algos.dt.policy import DTPolicy, action_bounds
from rlformer.config import EnvConfig, load_config
from rlformer.core.device import autocast_context, resolve_device
from rlformer.data import Dataset, Episode, load_dataset
from rlformer.data.sampling import WindowBatch, WindowSampler
from rlformer.networks.decision_transformer import DTOutput, dt_loss
from rlformer.networks.dt_spaces import StateLayout
from rlformer.rollout.env_factory import make_env


class HFDecisionTransformer(nn.Module):
    """transformers' DecisionTransformerModel behind rlformer's DT call signature."""

    def __init__(self, state_dim: int, act_dim: int, discrete: bool, context: int) -> None:
        super().__init__()
        from transformers import DecisionTransformerConfig, DecisionTransformerModel

        config = DecisionTransformerConfig(
            state_dim=state_dim,
            act_dim=act_dim,
            hidden_size=128,
            n_layer=3,
            n_head=1,
            n_inner=512,
            max_ep_len=4096,
            action_tanh=not discrete,
            n_positions=3 * context,
            resid_pdrop=0.1,
            attn_pdrop=0.1,
            embd_pdrop=0.1,
        )
        self.inner = DecisionTransformerModel(config)
        self.discrete, self.act_dim, self.state_dim = discrete, act_dim, state_dim

    def forward(self, states, actions, returns_to_go, timesteps, mask=None, memory=None):  # noqa: ANN001, ANN201
        if self.discrete:
            actions = nn.functional.one_hot(actions.long(), self.act_dim).float()
        out = self.inner(
            states=states,
            actions=actions,
            rewards=None,
            returns_to_go=returns_to_go,
            timesteps=timesteps,
            attention_mask=None if mask is None else mask.long(),
            return_dict=True,
        )
        return DTOutput(out.action_preds, None)  # no memory; deterministic: no mean or std


class HFImageDecisionTransformer(HFDecisionTransformer):
    """transformers' model on image windows: ``encoder`` (the CNN rlformer's DT reads the same
    images with, trained with the model) turns each frame into the ``states`` it is fed."""

    def __init__(self, encoder: nn.Module, act_dim: int, context: int) -> None:
        super().__init__(encoder.out_dim, act_dim, True, context)
        self.encoder = encoder

    def forward(self, states, actions, returns_to_go, timesteps, mask=None, memory=None):  # noqa: ANN001, ANN201
        # .float() as rlformer's DT does after its encoder (bf16 features under CUDA autocast).
        features = self.encoder(states).float()
        return super().forward(features, actions, returns_to_go, timesteps, mask, memory)


class BehaviourCloning(nn.Module):
    """MLP from the current (normalised) state to the action."""

    def __init__(self, state_dim: int, act_dim: int, discrete: bool) -> None:
        super().__init__()
        self.discrete = discrete
        layers: list[nn.Module] = []
        width = state_dim
        for _ in range(3):
            layers += [nn.Linear(width, 128), nn.ReLU(), nn.Dropout(0.1)]
            width = 128
        layers.append(nn.Linear(width, act_dim))
        if not discrete:
            layers.append(nn.Tanh())
        self.net = nn.Sequential(*layers)

    def forward(self, states, actions, returns_to_go, timesteps, mask=None, memory=None):  # noqa: ANN001, ANN201
        return DTOutput(self.net(states), None)


def train(
    models: dict[str, nn.Module],
    sampler: WindowSampler,
    steps: int,
    batch: int,
    discrete: bool,
    seed: int,
    round_steps: int = 20,
    warmup_steps: int = 0,
    device: torch.device | None = None,
    round_rates: dict[str, list[float]] | None = None,
) -> dict[str, float]:
    """Same loop for every model; returns training windows per second of each.

    The models take turns in rounds of ``round_steps`` steps, so load on a shared machine
    slows them alike and the ratios hold. Each round's windows are copied to ``device`` before
    its clock starts, and on CUDA the clock stops only after the device has finished.
    ``round_rates``, when given, receives each model's windows per second of every round.
    """
    device = device or torch.device("cpu")
    torch.manual_seed(seed)
    for model in models.values():
        model.to(device)
    rng = np.random.default_rng(seed)
    optimizers = {
        name: torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-4, fused=True)
        for name, model in models.items()
    }
    schedules = {
        name: torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 1000))
        for name, opt in optimizers.items()
    }

    def train_step(name: str, w: WindowBatch) -> None:
        model = models[name]
        with autocast_context(device):
            out = model(w.states, w.actions, w.returns_to_go, w.timesteps, w.mask)
            loss = dt_loss(out.action_preds, w.actions, w.mask, discrete)
        optimizers[name].zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizers[name].step()
        schedules[name].step()

    def sample() -> WindowBatch:
        return sampler.sample(batch, rng).to(device)

    def synchronize() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    warmup = [sample() for _ in range(warmup_steps)]
    for name, model in models.items():
        model.train()
        for w in warmup:  # not timed: lets torch.compile build its graphs
            train_step(name, w)
    seconds = dict.fromkeys(models, 0.0)
    for first in range(0, steps, round_steps):
        # Fresh windows every round, the same for every model; sampling is not timed.
        windows = [sample() for _ in range(min(round_steps, steps - first))]
        for name in models:
            synchronize()
            start = time.perf_counter()
            for w in windows:
                train_step(name, w)
            synchronize()
            elapsed = time.perf_counter() - start
            seconds[name] += elapsed
            if round_rates is not None:
                round_rates.setdefault(name, []).append(len(windows) * batch / elapsed)
    for model in models.values():
        model.cpu()
    return {name: steps * batch / seconds[name] for name in models}


def evaluate(
    model: nn.Module,
    sampler: WindowSampler,
    env_cfg: EnvConfig,
    target: float,
    scale: float,
    context: int,
    low,
    high,
    episodes: int,
) -> float:  # noqa: ANN001
    model.eval()
    env = make_env(env_cfg.id, env_cfg.kwargs)
    discrete = isinstance(env.action_space, gym.spaces.Discrete)
    policy = DTPolicy(
        model, sampler.state_mean, sampler.state_std, scale, context, False, low, high
    )
    policy.model.discrete = discrete  # the runner reads these four fields
    policy.model.state_dim = sampler.states.shape[1]
    policy.model.act_dim = (
        int(env.action_space.n) if discrete else int(np.prod(env.action_space.shape))
    )
    policy.model.action_nvec = [policy.model.act_dim]  # one component: Discrete or Box
    return float(np.mean(run_return_conditioned(policy, env_cfg, target, episodes).returns))


def quick_datasets(folder: Path) -> list[tuple[Path, str, dict, float, float]]:
    """Small datasets recorded on the spot: (file, env id, env kwargs, target, return scale)."""
    folder.mkdir(parents=True, exist_ok=True)
    specs = [
        ("hopper_random.hdf5", "Hopper-v5", {}, 100.0, 100.0),
        ("tmaze_random.hdf5", "rlformer/TMaze-v0", {"length": 5}, 1.0, 1.0),
    ]
    if importlib.util.find_spec("mujoco") is None:  # a GPU machine may lack it: T-Maze alone
        print("MuJoCo is not installed: the quick datasets leave Hopper out", flush=True)
        specs = [spec for spec in specs if not spec[1].startswith("Hopper")]
    for name, env_id, _, _, _ in specs:
        if not (folder / name).exists():
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "rlformer.cli",
                    "collect",
                    "--env",
                    env_id,
                    "--steps",
                    "20000",
                    "--out",
                    str(folder / name),
                ],
                check=True,
            )
    return [(folder / name, env, kw, target, scale) for name, env, kw, target, scale in specs]


ABLATIONS = {
    "rlformer DT (defaults: no positional scheme)": [],
    "rlformer DT, Transformer-XL relative positions": ["dt.core.positional=relative"],
    "rlformer DT, rotary positions": ["dt.core.positional=rotary"],
    "rlformer DT, no dropout (upper bound)": ["dt.core.dropout=0.0"],
    "rlformer DT, compile: true": ["dt.core.compile=true"],
}


def ablations(
    path: Path, env_id: str, scale: float, steps: int, batch: int, device: torch.device
) -> None:
    """Training speed of rlformer DT variants against transformers' model (no evaluation).

    Shows where the time goes: the positional scheme, dropout masks, torch.compile.
    """
    env = make_env(env_id, {})
    low, high = action_bounds(env.action_space)
    sampler = WindowSampler(normalized_actions(load_dataset(path), low, high), 20, scale)
    act_dim = int(np.prod(env.action_space.shape))
    models: dict[str, nn.Module] = {
        "transformers DecisionTransformerModel": HFDecisionTransformer(
            sampler.states.shape[1], act_dim, False, 20
        )
    }
    for name, overrides in ABLATIONS.items():
        cfg = load_config(None, ["algo=dt", f"env.id={env_id}", *overrides])
        models[name] = build_dt(cfg, env.observation_space, env.action_space)
    rates = train(
        models, sampler, steps, batch, discrete=False, seed=0, warmup_steps=5, device=device
    )
    base = rates["transformers DecisionTransformerModel"]
    print(f"\n{env_id} ({path}), {steps} steps x batch {batch}")
    print(f"{'learner':<50} {'samples/s':>10} {'vs HF':>7}")
    for name, rate in rates.items():
        print(f"{name:<50} {rate:>10.0f} {rate / base:>6.2f}x")


@dataclass(frozen=True)
class ImageTask:
    """Synthetic image-observation data of one shape, and the CNN rlformer reads it with."""

    title: str
    shape: tuple[int, int, int]  # H, W, C (channels last, as Gymnasium's envs give them)
    dtype: type
    cnn: str  # dt.cnn
    actions: int  # Discrete(n)
    steps: int  # timed steps unless --image-steps says otherwise (sized for a CPU core)
    round_steps: int  # steps per interleaved round: an 84x84 round of 20 holds 0.7 GB of windows


IMAGE_TASKS = {
    "minatar": ImageTask(
        "MinAtar-shaped 10x10x4 bool grids", (10, 10, 4), np.bool_, "minatar", 6, 300, 20
    ),
    "nature": ImageTask(
        "Atari-shaped 84x84x4 uint8 frames", (84, 84, 4), np.uint8, "nature", 18, 40, 5
    ),
}


def synthetic_image_dataset(
    task: ImageTask, transitions: int, seed: int = 0
) -> tuple[Dataset, gym.spaces.Box, gym.spaces.Discrete]:
    """Random episodes of ``task``'s frames (sparse ones for bool grids, as MinAtar's objects
    are), random actions and 0/1 rewards: a CNN's cost does not depend on what it sees."""
    rng = np.random.default_rng(seed)
    if task.dtype is np.bool_:
        space = gym.spaces.Box(0, 1, task.shape, np.bool_)
    else:
        space = gym.spaces.Box(0, 255, task.shape, np.uint8)
    episodes, left = [], transitions
    while left > 0:
        n = min(left, int(rng.integers(50, 500)))
        if task.dtype is np.bool_:
            frames = rng.random((n, *task.shape)) < 0.05
        else:
            frames = rng.integers(0, 256, (n, *task.shape), dtype=np.uint8)
        actions = rng.integers(0, task.actions, n)
        rewards = (rng.random(n) < 0.05).astype(np.float32)
        episodes.append(Episode(frames, actions, rewards, terminated=True, truncated=False))
        left -= n
    return (
        Dataset(episodes, source=f"synthetic {task.title}"),
        space,
        gym.spaces.Discrete(task.actions),
    )


def image_models(
    task: ImageTask, observation_space: gym.Space, context: int, overrides: list[str]
) -> dict[str, nn.Module]:
    """rlformer's DT with ``dt.cnn`` for the task, and transformers' model fed features of a
    CNN built by the same function from the same config (same class, same size)."""
    cfg = load_config(
        None,
        [
            "algo=dt",
            "env.id=synthetic",
            f"dt.context={context}",
            f"dt.core.memory_length={3 * context}",
            f"dt.cnn={task.cnn}",
            *overrides,
        ],
    )
    layout = StateLayout(observation_space)
    action_space = gym.spaces.Discrete(task.actions)
    torch.manual_seed(0)
    return {
        "rlformer DT (shared core)": build_dt(cfg, observation_space, action_space, layout),
        "transformers DecisionTransformerModel": HFImageDecisionTransformer(
            dt_encoder(cfg, layout), task.actions, context
        ),
    }


def image_speed(
    kind: str,
    steps: int | None,
    batch: int,
    device: torch.device,
    overrides: list[str],
    context: int = 20,
) -> dict[str, tuple[int, int, float, float]]:
    """Training speed on ``kind``'s image windows; returns and prints, per learner, (params,
    CNN params, samples/s over all rounds, median round's samples/s)."""
    task = IMAGE_TASKS[kind]
    steps = task.steps if steps is None else steps
    transitions = 20_000 if task.dtype is np.bool_ else 4_000
    dataset, observation_space, _ = synthetic_image_dataset(task, transitions)
    sampler = WindowSampler(
        dataset, context, 10.0, discrete_actions=True, layout=StateLayout(observation_space)
    )
    models = image_models(task, observation_space, context, overrides)
    per_round: dict[str, list[float]] = {}
    rates = train(
        models,
        sampler,
        steps,
        batch,
        discrete=True,
        seed=0,
        round_steps=task.round_steps,
        warmup_steps=5,
        device=device,
        round_rates=per_round,
    )
    rows = {
        name: (
            sum(p.numel() for p in model.parameters()),
            sum(p.numel() for p in model.encoder.parameters()),
            rates[name],
            float(np.median(per_round[name])),
        )
        for name, model in models.items()
    }
    base = rows["transformers DecisionTransformerModel"]
    print(
        f"\n{task.title} (dt.cnn={task.cnn}, Discrete({task.actions}), {transitions} synthetic "
        f"transitions), {steps} steps x batch {batch} on {device.type}, "
        f"rounds of {task.round_steps}"
    )
    print(
        f"{'learner':<40} {'params':>10} {'CNN params':>10} {'samples/s':>10} {'vs HF':>7} "
        f"{'median round':>12} {'vs HF':>7}"
    )
    for name, (params, cnn, rate, median) in rows.items():
        print(
            f"{name:<40} {params:>10,} {cnn:>10,} {rate:>10.1f} {rate / base[2]:>6.2f}x "
            f"{median:>12.1f} {median / base[3]:>6.2f}x"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", type=Path)
    parser.add_argument("--env")
    parser.add_argument("--target", type=float, default=3600.0)
    parser.add_argument("--return-scale", type=float, default=1000.0)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Config override for rlformer's DT, e.g. dt.core.positional=relative (repeatable).",
    )
    parser.add_argument(
        "--ablations",
        action="store_true",
        help="Time rlformer DT variants against transformers' model on the quick Hopper data.",
    )
    parser.add_argument(
        "--device", default="cpu", choices=["auto", "cpu", "cuda"], help="training device"
    )
    parser.add_argument(
        "--images",
        nargs="+",
        choices=sorted(IMAGE_TASKS),
        help="Time training on synthetic image observations instead (speed only): minatar "
        "(10x10x4 bool, dt.cnn=minatar) and/or nature (84x84x4 uint8, dt.cnn=nature).",
    )
    parser.add_argument(
        "--image-steps",
        type=int,
        help="Timed steps per image task (default: 300 for minatar, 40 for nature).",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    device = resolve_device(args.device)
    if args.images:
        for kind in args.images:
            image_speed(kind, args.image_steps, args.batch, device, args.overrides)
        return
    if args.ablations:
        path, env_id, _, _, scale = quick_datasets(Path("runs/bench_dt_data"))[0]
        ablations(path, env_id, scale, min(args.steps, 300), args.batch, device)
        return
    if args.quick or args.dataset is None:
        runs = quick_datasets(Path("runs/bench_dt_data"))
        args.steps = min(args.steps, 300) if args.quick else args.steps
    else:
        runs = [(args.dataset, args.env, {}, args.target, args.return_scale)]
    context = 20
    for path, env_id, kwargs, target, scale in runs:
        env_cfg = EnvConfig(id=env_id, kwargs=kwargs)
        env = make_env(env_id, kwargs)
        low, high = action_bounds(env.action_space)
        discrete = isinstance(env.action_space, gym.spaces.Discrete)
        dataset = normalized_actions(load_dataset(path), low, high)
        sampler = WindowSampler(dataset, context, scale, discrete_actions=discrete)
        cfg = load_config(
            None,
            [
                "algo=dt",
                f"env.id={env_id}",
                f"dt.context={context}",
                f"dt.core.memory_length={3 * context}",
                *args.overrides,
            ],
        )
        state_dim = sampler.states.shape[1]
        act_dim = int(env.action_space.n) if discrete else int(np.prod(env.action_space.shape))
        models = {
            "rlformer DT (shared core)": build_dt(cfg, env.observation_space, env.action_space),
            "transformers DecisionTransformerModel": HFDecisionTransformer(
                state_dim, act_dim, discrete, context
            ),
            "behaviour cloning (MLP)": BehaviourCloning(state_dim, act_dim, discrete),
        }
        # Untimed warm-up steps: otherwise the first model timed also pays for the device's
        # one-off start (CUDA context, kernel selection), which made it look 1.4x slower.
        rates = train(
            models, sampler, args.steps, args.batch, discrete, seed=0, warmup_steps=5, device=device
        )
        rows = []
        for name, model in models.items():
            params = sum(p.numel() for p in model.parameters())
            score = evaluate(
                model, sampler, env_cfg, target, scale, context, low, high, args.episodes
            )
            rows.append((name, params, rates[name], score))
        hf_rate = rows[1][2]
        print(
            f"\n{env_id} ({path}, {dataset.num_transitions} transitions), {args.steps} steps x "
            f"batch {args.batch} on {device.type}, target {target:g}, "
            f"dataset return mean {dataset.returns.mean():.2f}"
        )
        print(f"{'learner':<40} {'params':>9} {'samples/s':>10} {'vs HF':>7} {'return':>9}")
        for name, params, rate, score in rows:
            print(f"{name:<40} {params:>9,} {rate:>10.0f} {rate / hf_rate:>6.2f}x {score:>9.2f}")


if __name__ == "__main__":
    main()
