"""Run CleanRL's ``ppo_trxl.py``, unmodified, on a POPGym task, as a peer of rlformer's GTrXL.

Run it with the peer venv's python (``benchmarks/peers/setup_cleanrl.sh`` builds it and
exports the script), never with rlformer's: CleanRL's script is written for gymnasium 0.29,
rlformer for gymnasium 1.x, and this file imports nothing from rlformer.

The script cannot train on POPGym ids as it stands, and this runner changes only what the peer
comparison allows, from outside the script (the script itself runs with ``runpy`` as
``__main__``, with ``sys.argv`` set to the flags below):

* ``import popgym`` registers the ``popgym-*`` ids, which the script never imports.
* The id is registered again, to a factory that builds the same env as rlformer's ``popgym``
  preset sees: POPGym's ``PreviousAction`` around the bare env, then every Discrete /
  MultiDiscrete code one-hot encoded (one block per code, leaves in Tuple order, Box leaves
  flattened as floats), i.e. the vector that rlformer's observation encoder computes before its
  first learned layer. The script's ``Linear(obs_dim, trxl_dim)`` reads that vector.
* The factory accepts and drops the ``render_mode`` keyword that the script passes to every
  ``gym.make`` (POPGym's constructors reject it).
* The env exposes ``max_episode_steps`` (POPGym's ``max_episode_length``, or Concentration's
  ``episode_length``), which the script reads to size its episodic memory; POPGym registers no
  time limit, and none is added (rlformer adds none either).
* Discrete actions reach the env as Python ints (the script hands each env a length-1 array).

After training, the agent the script leaves in its globals plays ``--eval-episodes`` episodes
on the episodes rlformer's benchmarks score every agent on (8 envs seeded
``seed + 1_000_000 + i``, each continuing its own stream on reset): greedily (argmax of each
action branch), the ``score``, as rlformer's popgym evaluation does, and once more with sampled
actions (``peer.eval.sampled_mean``), which should sit near the training curve's last point.
The last line printed is one JSON object: the fields of a ``benchmarks/memory_suite.py``
row (task, agent, seed, env_steps, seconds, score, curve, budget, mmer, ...) plus a ``peer``
object with the details (drop ``peer`` to append it to a suite results file). ``curve`` is the
script's own ``episode/r_mean`` (the mean return of the last 100 finished training episodes,
logged after each rollout) and ``mmer`` its maximum, as for rlformer's agents.

    /work/peers/cleanrl-venv/bin/python benchmarks/peers/cleanrl_trxl.py \\
        --cleanrl-dir /work/peers/cleanrl --out-dir /tmp/cleanrl_runs \\
        --env-id popgym-CountRecallEasy-v0 --seed 0 --total-timesteps 20000 \\
        -- --trxl-num-layers 1 --trxl-dim 64 --trxl-num-heads 4 --trxl-memory-length 64 \\
        --num-envs 16 --num-steps 64

Everything after ``--`` goes to ``ppo_trxl.py`` as it is (its tyro flags, e.g. ``--init-lr``).
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import json
import os
import runpy
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import popgym  # noqa: F401  (registers the popgym-* ids)
import torch
from popgym.wrappers import PreviousAction

SCRIPT = Path("cleanrl/ppo_trxl/ppo_trxl.py")
AGENT = "cleanrl_trxl"
# rlformer's final evaluation plays episodes seeded from the training seed + this offset
# (rlformer.runs.algorithm.FINAL_EVAL_SEED_OFFSET, restated: this file must not import rlformer).
FINAL_EVAL_SEED_OFFSET = 1_000_000
EVAL_NUM_ENVS = 8  # rlformer's eval.num_envs default, which the popgym preset keeps
RUNNER_OWNED = ("--env-id", "--seed", "--total-timesteps", "--save-model", "--no-save-model")
REJECTED = ("--track", "--capture-video", "--reconstruction-coef")


class OneHotObservation(gym.ObservationWrapper):
    """Every Discrete / MultiDiscrete code of the (Tuple of) observation as a one-hot block,
    concatenated with Box / MultiBinary leaves as floats, into one flat float32 Box.

    This is the input rlformer's ``ObservationEncoder`` builds for the same space, so both
    agents read the same numbers; the raw codes would reach CleanRL's linear encoder as
    magnitudes (a card's suit 3 "larger" than suit 1).
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.leaves = _leaves(env.observation_space)
        lows, highs = [], []
        for leaf in self.leaves:
            if isinstance(leaf, gym.spaces.Box):
                lows.append(np.broadcast_to(leaf.low, leaf.shape).reshape(-1))
                highs.append(np.broadcast_to(leaf.high, leaf.shape).reshape(-1))
            else:
                size = _width(leaf)
                lows.append(np.zeros(size))
                highs.append(np.ones(size))
        self.observation_space = gym.spaces.Box(
            np.concatenate(lows).astype(np.float32),
            np.concatenate(highs).astype(np.float32),
            dtype=np.float32,
        )

    def observation(self, observation: Any) -> np.ndarray:
        values = _leaf_values(self.env.observation_space, observation)
        return np.concatenate(
            [_encode(leaf, value) for leaf, value in zip(self.leaves, values, strict=True)]
        ).astype(np.float32)


def _leaves(space: gym.Space) -> list[gym.Space]:
    """Leaf spaces in rlformer's order: Tuple index order, Dict key order, depth first."""
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for sub in space.spaces for leaf in _leaves(sub)]
    if isinstance(space, gym.spaces.Dict):
        return [leaf for sub in space.spaces.values() for leaf in _leaves(sub)]
    return [space]


def _leaf_values(space: gym.Space, value: Any) -> list[Any]:
    if isinstance(space, gym.spaces.Tuple):
        return [
            v
            for sub, item in zip(space.spaces, value, strict=True)
            for v in _leaf_values(sub, item)
        ]
    if isinstance(space, gym.spaces.Dict):
        return [v for key, sub in space.spaces.items() for v in _leaf_values(sub, value[key])]
    return [value]


def _width(leaf: gym.Space) -> int:
    if isinstance(leaf, gym.spaces.Discrete):
        return int(leaf.n)
    if isinstance(leaf, gym.spaces.MultiDiscrete):
        return int(np.asarray(leaf.nvec).sum())
    return int(np.prod(leaf.shape))


def _encode(leaf: gym.Space, value: Any) -> np.ndarray:
    out = np.zeros(_width(leaf), dtype=np.float32)
    if isinstance(leaf, gym.spaces.Discrete):
        out[int(np.asarray(value).reshape(-1)[0]) - int(leaf.start)] = 1.0
    elif isinstance(leaf, gym.spaces.MultiDiscrete):
        nvec = np.asarray(leaf.nvec).reshape(-1)
        start = np.asarray(getattr(leaf, "start", 0)).reshape(-1)
        offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
        out[offsets + np.asarray(value).reshape(-1).astype(np.int64) - start] = 1.0
    else:  # Box or MultiBinary: the values themselves (rlformer's popgym preset normalises none)
        out[:] = np.asarray(value, dtype=np.float32).reshape(-1)
    return out


class ScalarDiscreteAction(gym.ActionWrapper):
    """A Discrete env gets ``int(action)``: the script hands each env a length-1 array."""

    def action(self, action: Any) -> Any:
        if not isinstance(self.action_space, gym.spaces.Discrete):
            return action
        flat = np.asarray(action).reshape(-1)
        if flat.size != 1:
            raise ValueError(f"a Discrete action must be one number, got {action!r}")
        return int(flat[0])


class EpisodeLimit(gym.Wrapper):
    """Says the longest episode the env can have, as ``max_episode_steps``: the script reads
    that attribute when the spec has no time limit, and sizes its memory and positions by it."""

    def __init__(self, env: gym.Env, max_episode_steps: int) -> None:
        super().__init__(env)
        self.max_episode_steps = max_episode_steps


def popgym_episode_limit(env: gym.Env) -> int:
    """The longest episode of a POPGym env (its step count at which it always ends)."""
    bare = env.unwrapped
    for name in ("max_episode_length", "episode_length"):
        value = getattr(bare, name, None)
        if isinstance(value, (int, np.integer)) and value > 0:
            return int(value)
    raise ValueError(f"{type(bare).__name__} states no episode limit; cannot size the memory")


def make_peer_env(
    original: gym.envs.registration.EnvSpec, render_mode: str | None = None
) -> gym.Env:
    """The POPGym env of ``original`` as rlformer's ``popgym`` preset sees it, for the script.

    ``render_mode`` is accepted and dropped: the script passes one to every env it makes.
    """
    del render_mode
    bare = gym.make(original).unwrapped  # rlformer wraps the bare env too (unwrapped: true)
    limit = popgym_episode_limit(bare)
    env = OneHotObservation(PreviousAction(bare))
    return EpisodeLimit(ScalarDiscreteAction(env), limit)


def register_peer_env(env_id: str) -> int:
    """Point ``env_id`` at :func:`make_peer_env`; returns the env's episode limit."""
    if not env_id.startswith("popgym-"):
        raise SystemExit(f"--env-id {env_id!r} is not a POPGym id (popgym-...)")
    original = gym.spec(env_id)
    probe = gym.make(original)
    limit = popgym_episode_limit(probe)
    probe.close()
    gym.registry.pop(env_id)
    gym.register(id=env_id, entry_point=functools.partial(make_peer_env, original))
    return limit


def flag_value(flags: list[str], name: str, default: int) -> int:
    """The value of ``--name`` in tyro-style ``flags`` (last one wins), else ``default``."""
    value = default
    for index, flag in enumerate(flags):
        if flag == name and index + 1 < len(flags):
            value = int(flags[index + 1])
        elif flag.startswith(name + "="):
            value = int(flag.split("=", 1)[1])
    return value


def check_flags(flags: list[str], episode_limit: int) -> None:
    """Refuse flags the runner sets itself or that cannot work on POPGym, and rollouts too
    short for the script's logging: after each rollout it prints the mean return of the last
    100 finished episodes and raises KeyError when none has finished yet."""
    for flag in flags:
        name = flag.split("=", 1)[0]
        if name in RUNNER_OWNED:
            raise SystemExit(f"{name} is the runner's own option: give it before `--`")
        if name in REJECTED:
            raise SystemExit(
                f"{name} is not supported here (wandb / video / image reconstruction need what "
                "POPGym has not: the reconstruction decoder expects 84x84x3 images)"
            )
    num_steps = flag_value(flags, "--num-steps", 512)
    if num_steps < episode_limit:
        raise SystemExit(
            f"--num-steps {num_steps} is shorter than this task's episodes (up to "
            f"{episode_limit} steps): ppo_trxl.py fails (KeyError 'r_mean') after a rollout in "
            "which no episode finished. Use --num-steps >= the episode limit, e.g. "
            "--num-envs 8 --num-steps 128 for a 1024-step rollout"
        )


def evaluate(
    namespace: dict[str, Any], env_id: str, episodes: int, seed: int, greedy: bool = True
) -> list[float]:
    """Returns of ``episodes`` episodes of the trained agent on rlformer's evaluation episodes
    (see the module docstring): greedy (each action branch's argmax), or sampled as in training.

    The memory windows and masks are the script's own tensors (``memory_indices``,
    ``memory_mask`` in its globals), indexed by each env's step in its episode as it does.
    """
    agent, args = namespace["agent"], namespace["args"]
    windows, masks = namespace["memory_indices"], namespace["memory_mask"]
    length, max_steps = args.trxl_memory_length, int(namespace["max_episode_steps"])
    num_envs = max(1, min(EVAL_NUM_ENVS, episodes))
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(env_id) for _ in range(num_envs)])
    obs, _ = envs.reset(seed=[seed + i for i in range(num_envs)])
    memory = torch.zeros(num_envs, max_steps, args.trxl_num_layers, args.trxl_dim)
    step = torch.zeros(num_envs, dtype=torch.long)
    slots = torch.arange(num_envs)
    running = np.zeros(num_envs)
    started, active, returns = num_envs, np.ones(num_envs, dtype=bool), []
    try:
        while active.any():
            index = windows[step]
            with torch.no_grad():
                action, _, _, _, new_memory = agent.get_action_and_value(
                    torch.as_tensor(obs, dtype=torch.float32),
                    memory[slots[:, None], index],
                    masks[step.clamp(max=length - 1)],
                    index,
                )
                if greedy:  # agent.x: the script keeps its actor branches' input
                    action = torch.stack([b(agent.x).argmax(-1) for b in agent.actor_branches], 1)
            memory[slots, step] = new_memory
            obs, reward, terminated, truncated, _ = envs.step(action.numpy())
            running += reward
            step += 1
            for slot in np.flatnonzero(terminated | truncated):
                if active[slot]:
                    returns.append(float(running[slot]))
                    if started < episodes:
                        started += 1
                    else:
                        active[slot] = False
                running[slot] = 0.0
                step[slot] = 0
                memory[slot] = 0.0
    finally:
        envs.close()
    return returns


def read_curve(run_dir: Path) -> list[tuple[int, float]]:
    """(env steps, mean return of the last 100 finished training episodes) after each rollout,
    as the script logs it (tag ``episode/r_mean``)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return [(int(e.step), float(e.value)) for e in events.Scalars("episode/r_mean")]


def cleanrl_commit(root: Path) -> str | None:
    path = root / "COMMIT"
    return path.read_text().strip() if path.exists() else None


def versions() -> dict[str, str]:
    names = ("torch", "gymnasium", "popgym", "numpy", "tyro", "einops", "tensorboard")
    return {name: importlib.metadata.version(name) for name in names}


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cleanrl-dir", type=Path, required=True, help="holds " + str(SCRIPT))
    parser.add_argument("--out-dir", type=Path, required=True, help="tensorboard runs, model")
    parser.add_argument("--env-id", required=True, help="a popgym-* id")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--total-timesteps", type=int, required=True)
    parser.add_argument("--eval-episodes", type=int, default=100, help="0 skips it")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (rlformer: 1)")
    parser.add_argument("--cuda", action="store_true", help="let the script use a GPU")
    parser.add_argument("--json-out", type=Path, help="also append the JSON line to this file")
    return parser.parse_args(argv[:split]), argv[split + 1 :]


def main(argv: list[str]) -> None:
    opts, flags = parse_args(argv)
    root = opts.cleanrl_dir.resolve()
    out_dir = opts.out_dir.resolve()  # resolved before the chdir below
    json_out = None if opts.json_out is None else opts.json_out.resolve()
    script = root / SCRIPT
    if not script.exists():
        raise SystemExit(f"{script} not found: export it first (setup_cleanrl.sh)")
    torch.set_num_threads(opts.threads)
    limit = register_peer_env(opts.env_id)
    check_flags(flags, limit)
    script_argv = [
        str(script),
        "--env-id",
        opts.env_id,
        "--seed",
        str(opts.seed),
        "--total-timesteps",
        str(opts.total_timesteps),
        "--save-model",
        "--cuda" if opts.cuda else "--no-cuda",
        *flags,
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    os.chdir(out_dir)  # the script writes runs/<run name>/ under the working directory
    sys.path.insert(0, str(script.parent))  # as `python ppo_trxl.py` would (pom_env import)
    sys.argv = script_argv
    started = time.perf_counter()
    namespace = runpy.run_path(str(script), run_name="__main__")
    # The script's own clock starts just before its first env reset, after its imports and its
    # env and model setup: from there to here is its training loop (and the model save).
    loop_seconds = time.time() - namespace["start_time"]
    total_seconds = time.perf_counter() - started
    args = namespace["args"]
    env_steps = int(args.num_iterations * args.batch_size)
    run_dir = out_dir / "runs" / namespace["run_name"]
    curve = read_curve(run_dir)
    eval_seed = opts.seed + FINAL_EVAL_SEED_OFFSET
    returns: list[float] = []
    sampled: list[float] = []
    if opts.eval_episodes > 0:
        returns = evaluate(namespace, opts.env_id, opts.eval_episodes, eval_seed)
        sampled = evaluate(namespace, opts.env_id, opts.eval_episodes, eval_seed, greedy=False)
    row = {
        "task": opts.env_id,
        "agent": AGENT,
        "seed": opts.seed,
        "env_steps": env_steps,
        "seconds": loop_seconds,
        "score": float(np.mean(returns)) if returns else None,
        "success_rate": None,
        "curve": curve,
        "commit": cleanrl_commit(root),
        "overrides": flags,
        "budget": opts.total_timesteps,
        "mmer": max((value for _, value in curve), default=None),
        "peer": {
            "steps_per_s": env_steps / loop_seconds,
            "seconds_cover": "the script's training loop, timed from its own start_time (just "
            "before the first env reset) to the end of its __main__ (model save included, "
            "evaluation not)",
            "total_seconds": total_seconds,
            "total_seconds_cover": "the whole script run: its imports, env and model setup, "
            "training loop, model save",
            "train_return_last100": curve[-1][1] if curve else None,
            "eval": {
                "episodes": len(returns),
                "actions": "greedy",
                "seed": eval_seed,
                "num_envs": min(EVAL_NUM_ENVS, max(1, opts.eval_episodes)),
                "return_std": float(np.std(returns)) if returns else None,
                "sampled_mean": float(np.mean(sampled)) if sampled else None,
                "sampled_std": float(np.std(sampled)) if sampled else None,
            },
            "episode_limit": limit,
            "memory_length": int(args.trxl_memory_length),
            "args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
            "threads": opts.threads,
            "device": str(namespace["device"]),
            "versions": versions(),
            "run_dir": str(run_dir),
            "model": str(run_dir / f"{args.exp_name}.cleanrl_model"),
        },
    }
    line = json.dumps(row)
    print(line)
    if json_out is not None:
        with json_out.open("a") as out:
            out.write(line + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
