"""Named settings for a family of tasks, laid under a config with ``preset: NAME``, or by
``preset: auto`` (the default) from the env id's family.

rl-baselines3-zoo keeps tuned hyperparameters per env id; rlformer keeps them per task family,
because what makes GTrXL-PPO learn is shared across a family (POPGym's previous-action input and
rollout shape, MiniGrid's one-hot view) and a family holds tasks nobody tuned for yet. rlformer's
own tasks without velocities share no such settings (Pendulum wants gamma 0.9 and 32 envs,
LunarLander gamma 0.999), so each of them is a family of one.
Each preset holds only what its benchmark evidence chose (docs/benchmarks/ says where); the
config's own keys win over it, and ``--set`` wins over both. Mappings merge key by key; a list
(such as ``env.wrappers``) is replaced whole, so a config that lists wrappers gets exactly those.

Example:
    >>> raw = apply_preset({"preset": "popgym", "env": {"id": "popgym-RepeatFirstEasy-v0"}})
    >>> raw["rollout"]["envs_per_worker"], raw["env"]["id"]
    (16, 'popgym-RepeatFirstEasy-v0')
"""

from __future__ import annotations

import copy
from collections.abc import Collection
from typing import Any

# The GTrXL the presets were measured with, stated here so that a change of the PPO model
# defaults leaves the presets' evidence standing (merging copies it, so sharing is safe).
_ONE_LAYER_CORE: dict[str, Any] = {
    "n_layers": 1,
    "d_model": 64,
    "n_heads": 4,
    "d_ff": 128,
    "memory_length": 64,
    "gate_bias": 0.0,
}

# POPGym (any task, tuned on the 10 Easy tasks): POPGym's own PreviousAction wrapper, as in its
# paper; 16 envs x 64 steps, lr 5e-4, entropy 0.01; one GTrXL layer of width 64 with gate bias 0.
# With these, and without the episode clock, GTrXL was at or above the best LSTM/GRU agent on 10
# of 10 Easy tasks (200k steps). The episode clock (each token's step in its episode, capped at
# M) was chosen on CountRecall at 1M steps (seeds 0-2: -0.514 against -0.756 without it, the GRU
# torso -0.614) and checked on tasks it was not chosen on: RepeatPrevious at 200k steps (0.982
# against 0.955, seeds 0-2) and Battleship at 1M
# (docs/benchmarks/memory.md#popgym-countrecall-and-the-other-hard-tasks). Rewards are scaled as
# by default (model.value_scaling return_std: docs/benchmarks/value_scaling.md).
_POPGYM: dict[str, Any] = {
    "env": {
        "imports": ["popgym"],
        "wrappers": [{"class": "popgym.wrappers:PreviousAction", "unwrapped": True}],
    },
    "rollout": {"envs_per_worker": 16, "fragment_length": 64},
    "model": {
        "core": {**_ONE_LAYER_CORE, "episode_clock": True},
        "recurrent_hidden": 64,
    },
    "ppo": {
        "total_steps": 200_000,
        "learning_rate": 0.0005,
        "update_epochs": 4,
        "num_minibatches": 4,
        "ent_coef": 0.01,
    },
    "eval": {"episodes": 100},
}

# MiniGrid (any task): MiniGrid's own one-hot view (each cell's object, colour and state codes as
# 11 + 6 + 3 bits), without the mission text (it cannot be encoded), flattened into the core's
# input projection. As codes / 10 a key and a ball differ by 0.1 in one input: with the cue
# copied into every view of MiniGrid-MemoryS11 (no memory needed), a CNN or a flat vector of the
# codes stayed at chance for 300k steps, the one-hot view scored 0.99; on DoorKey-5x5 (200k
# steps) it scored 0.96 on each of seeds 0-2, the CNN 0.89, 0.04 and 0.32 (measured 2026-11-24).
# Normalised observations make rare bits loud: a bit set with frequency p becomes
# sqrt((1 - p) / p) where the walls seen at every step fade to near 0. Unnormalised, the cue's
# two bits were 2 of about 150 set in its view, and with the cue in view at the first step only
# the agent stayed at chance for 1M steps; normalised, it solved that probe by 200k, and
# MiniGrid-MemoryS11 itself (seed 0) by 1.1M steps at lr 3e-4 and by 400k at lr 1e-3. With
# both, seeds 0-3 succeed in 100% of episodes at 1M steps, seed 4 in 51% (DoorKey: 100% on 0-2).
_MINIGRID: dict[str, Any] = {
    "env": {
        "imports": ["minigrid"],
        "wrappers": [
            {"class": "rlformer_envs:SuccessFromReward"},  # evaluation reports success_rate
            {"class": "minigrid.wrappers:OneHotPartialObsWrapper"},
            {"class": "minigrid.wrappers:ImgObsWrapper"},
        ],
    },
    "rollout": {"envs_per_worker": 16, "fragment_length": 128},
    "model": {
        "core": {**_ONE_LAYER_CORE, "memory_length": 128},
        "recurrent_hidden": 64,
        "normalize_obs": True,
        "normalize_reward": False,  # as measured
    },
    "ppo": {"learning_rate": 0.001, "update_epochs": 4, "num_minibatches": 4, "ent_coef": 0.01},
    # Sampled actions, as rl-starter-files evaluates by default. With the earlier CNN encoder the
    # greedy DoorKey-5x5 policy timed out in most episodes (0.11, sampled: 0.89); with the
    # one-hot view both score 0.96 there, and sampling keeps evaluation free of such loops.
    "eval": {"episodes": 100, "deterministic": False},
}

# CartPole without velocities (rlformer/CartPoleNoVel-v0): rl-baselines3-zoo's RecurrentPPO
# rollout shape and discounting for CartPoleNoVel (8 envs x 32 steps, gamma 0.98, GAE 0.8, no
# entropy bonus, normalised observations) with 10 epochs and lr 5e-4, memory 32; like SB3, no
# value clipping and no reward normalisation: with both, 5 seeds averaged 324 against 467 over 4
# without (100k steps). Unlike SB3, no per-minibatch advantage normalisation: a minibatch here
# is 2 sequences of 32 steps, and once the policy is solved its advantages are mostly noise that
# normalising scales up to full-size updates. With it, 20 seeds scored 435.5, every one reaching
# 500 and then oscillating; without it, seeds 10-19 score 497.4 and seeds 0-9 (not used to
# choose it) 477.7: 487.5 over 20 (target 475). Two minibatches of 4 sequences instead of four
# of 2 (20 gradient steps per batch, the zoo's RecurrentPPO takes 20 too) halve the update's
# cost at no loss: seeds 10-19 484.8, seeds 0-9 (not used to choose it) 487.3. The preset also
# evaluates every 40 iterations (10k steps) on 10 episodes and keeps the best weights in
# checkpoints/best.pt (with normalisation those scored 499.7 over the 20 seeds).
_CARTPOLE_NOVEL: dict[str, Any] = {
    "rollout": {"envs_per_worker": 8, "fragment_length": 32},
    "model": {
        "core": {**_ONE_LAYER_CORE, "memory_length": 32},
        "recurrent_hidden": 64,
        "normalize_obs": True,
        "normalize_reward": False,  # see above
    },
    "ppo": {
        "total_steps": 100_000,
        "learning_rate": 0.0005,
        "gamma": 0.98,
        "gae_lambda": 0.8,
        "ent_coef": 0.0,
        "clip_value": False,
        "norm_adv": False,
        "update_epochs": 10,
        "num_minibatches": 2,
    },
    "eval": {"episodes": 100, "every": 40, "every_episodes": 10},
}

# Pendulum without angular velocity (rlformer/PendulumNoVel-v0), tuned for 100k steps:
# normalised rewards (-16..0 per step otherwise swamp the value head: -1,079 without), 10 epochs
# of 32 minibatches per 32 x 128-step batch, gamma 0.9 and lr 1e-3 as in rl-baselines3-zoo's
# Pendulum entries; a narrow core (width 32, 2 heads, gate bias 2) with memory 4: the velocity
# it must infer is in the last step or two, and attention spread over 16 steps let 2 seeds in
# 10 settle on never swinging up (mean -300); with 4, seeds 0-19 all end at -199 to -294 (-232).
_PENDULUM_NOVEL: dict[str, Any] = {
    "rollout": {"envs_per_worker": 32, "fragment_length": 128},
    "model": {
        "core": {
            "n_layers": 1,
            "d_model": 32,
            "n_heads": 2,
            "d_ff": 64,
            "memory_length": 4,
            "gate_bias": 2.0,
        },
        "normalize_reward": True,
    },
    "ppo": {
        "total_steps": 100_000,
        "learning_rate": 0.001,
        "gamma": 0.9,
        "gae_lambda": 0.95,
        "ent_coef": 0.0,
        "update_epochs": 10,
        "num_minibatches": 32,
    },
    "eval": {"episodes": 100},
}

# LunarLander without velocities (rlformer/LunarLanderNoVel-v0): rl-baselines3-zoo's RecurrentPPO
# entry for LunarLanderNoVel (16 envs, gamma 0.999, GAE 0.98, 4 epochs, entropy 0.01, 1M steps)
# with 128-step fragments (memory 64 carries context across them), normalised observations and
# rewards. Evaluation samples actions: the greedy policy of two of three seeds hovers (-12 and
# -68 over 100 episodes) where the policy that was trained, sampling, lands (255 and 216; the
# third seed 251 and 255; measured 2026-11-24).
_LUNARLANDER_NOVEL: dict[str, Any] = {
    "rollout": {"envs_per_worker": 16, "fragment_length": 128},
    "model": {
        "core": _ONE_LAYER_CORE,
        "recurrent_hidden": 64,
        "normalize_obs": True,
        "normalize_reward": True,
    },
    "ppo": {
        "total_steps": 1_000_000,
        "learning_rate": 0.0003,
        "gamma": 0.999,
        "gae_lambda": 0.98,
        "ent_coef": 0.01,
        "update_epochs": 4,
        "num_minibatches": 8,
    },
    "eval": {"episodes": 100, "deterministic": False},
}

# Gymnasium's MuJoCo tasks (Hopper, Walker2d, HalfCheetah, Ant, ...): the defaults plus running
# observation normalisation, as SB3 users add VecNormalize for MuJoCo. Their observations spread
# from hundredths (angles) to about 6 (velocities), and on Hopper-v5 (500k steps, 3 seeds) the
# defaults alone scored 868 where normalised observations scored 2,099
# (docs/benchmarks/defaults.md). Off by default elsewhere: on LunarLander-v3 and Pendulum-v1
# the same change lowered the mean (270 to 238, -173 to -254).
_MUJOCO: dict[str, Any] = {"model": {"normalize_obs": True}}

PRESETS: dict[str, dict[str, Any]] = {
    "popgym": _POPGYM,
    "minigrid": _MINIGRID,
    "cartpole-novel": _CARTPOLE_NOVEL,
    "pendulum-novel": _PENDULUM_NOVEL,
    "lunarlander-novel": _LUNARLANDER_NOVEL,
    "mujoco": _MUJOCO,
}

# ``preset: auto`` picks by the env id's family (the part after a ``module:`` prefix). The
# presets hold PPO evidence, so auto picks none for the offline algorithms.
_FAMILIES = {
    "popgym-": "popgym",
    "MiniGrid-": "minigrid",
    "rlformer/CartPoleNoVel-": "cartpole-novel",
    "rlformer/PendulumNoVel-": "pendulum-novel",
    "rlformer/LunarLanderNoVel-": "lunarlander-novel",
    **{
        f"{task}-": "mujoco"
        for task in (
            "Ant",
            "HalfCheetah",
            "Hopper",
            "Humanoid",
            "HumanoidStandup",
            "InvertedDoublePendulum",
            "InvertedPendulum",
            "Pusher",
            "Reacher",
            "Swimmer",
            "Walker2d",
        )
    },
}


class UnknownPresetError(ValueError):
    """``preset`` names no preset; the message lists the ones there are."""


def merged(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``top`` laid over ``base``: mappings merge key by key, anything else in ``top`` wins."""
    result = copy.deepcopy(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def family_preset(env_id: str) -> str | None:
    """The preset of ``env_id``'s task family, if there is one (``popgym:popgym-X`` -> popgym)."""
    bare = env_id.rpartition(":")[2]
    return next((name for prefix, name in _FAMILIES.items() if bare.startswith(prefix)), None)


# What a preset named for an offline algorithm (dt, odt) gives it: the env as the family needs it
# built (imports, wrappers such as MiniGrid's one-hot view). The rest was measured for PPO.
OFFLINE_SECTIONS = ("env",)


def apply_preset(raw: dict[str, Any], sections: Collection[str] | None = None) -> dict[str, Any]:
    """``raw`` laid over the preset it names (unchanged when it names none).

    ``sections``: the sections of a named preset the run's algorithm takes (its declaration's
    ``preset_sections``, :mod:`rlformer.config.sections.spec`). With None it takes them all and
    ``auto`` becomes the env family's preset, else ``auto`` becomes null: the presets hold PPO
    evidence. Either way the result says which, so a run directory's config.yaml records what
    was applied. Offline algorithms (dt, odt) take only :data:`OFFLINE_SECTIONS`, so a DT trains on
    the env its data was recorded on with that preset.
    """
    name = raw.get("preset", "auto")
    if name == "auto":
        env = raw.get("env")
        env_id = env.get("id") if isinstance(env, dict) else None
        name = family_preset(env_id) if sections is None and isinstance(env_id, str) else None
        raw = {**raw, "preset": name}
    if name is None:
        return raw
    if not isinstance(name, str) or name not in PRESETS:
        raise UnknownPresetError(
            f"preset: unknown preset {name!r}; choose one of "
            f"{', '.join(sorted(PRESETS))}, auto (by env.id) or null (none)"
        )
    preset = PRESETS[name]
    if sections is not None:
        preset = {key: value for key, value in preset.items() if key in sections}
    return merged(preset, raw)
