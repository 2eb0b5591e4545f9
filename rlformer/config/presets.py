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

# POPGym: tuned on the 10 Easy tasks; evidence in docs/benchmarks/memory.md (POPGym sections).
_POPGYM: dict[str, Any] = {
    "env": {
        "imports": ["popgym"],
        # the previous action in every observation, as in the POPGym paper
        "wrappers": [{"class": "popgym.wrappers:PreviousAction", "unwrapped": True}],
    },
    "rollout": {"envs_per_worker": 16, "fragment_length": 64},  # chosen on the 10 Easy tasks
    "model": {
        # one narrow layer; the episode clock won on CountRecall at 1M (-0.514 against -0.756)
        "core": {**_ONE_LAYER_CORE, "episode_clock": True},
        "recurrent_hidden": 64,  # the GRU/LSTM baselines' width, as POPGym's
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

# MiniGrid: docs/benchmarks/memory.md (MiniGrid-MemoryS11) and defaults.md (DoorKey).
_MINIGRID: dict[str, Any] = {
    "env": {
        "imports": ["minigrid"],
        "wrappers": [
            {"class": "rlformer_envs:SuccessFromReward"},  # evaluation reports success_rate
            # one-hot cells: codes / 10 left MemoryS11 at chance, one-hot reached 0.99
            {"class": "minigrid.wrappers:OneHotPartialObsWrapper"},
            {"class": "minigrid.wrappers:ImgObsWrapper"},
        ],
    },
    "rollout": {"envs_per_worker": 16, "fragment_length": 128},
    "model": {
        "core": {**_ONE_LAYER_CORE, "memory_length": 128},
        "recurrent_hidden": 64,
        "normalize_obs": True,  # rare bits (the cue) stand out: MemoryS11 solved, not at chance
        "normalize_reward": False,  # the setting MemoryS11's 100% (seeds 0-3) was measured with
    },
    # lr 1e-3 solved MemoryS11 by 400k steps, 3e-4 by 1.1M
    "ppo": {"learning_rate": 0.001, "update_epochs": 4, "num_minibatches": 4, "ent_coef": 0.01},
    "eval": {"episodes": 100, "deterministic": False},  # sampled, as rl-starter-files evaluates
}

# CartPole without velocities: rl-baselines3-zoo's RecurrentPPO shape for CartPoleNoVel; evidence
# in docs/benchmarks/memory.md (CartPole without velocities).
_CARTPOLE_NOVEL: dict[str, Any] = {
    "rollout": {"envs_per_worker": 8, "fragment_length": 32},
    "model": {
        "core": {**_ONE_LAYER_CORE, "memory_length": 32},
        "recurrent_hidden": 64,
        "normalize_obs": True,  # as the zoo's entry
        "normalize_reward": False,  # as SB3: with it and value clipping 324, without 467
    },
    "ppo": {
        "total_steps": 100_000,
        "learning_rate": 0.0005,
        "gamma": 0.98,
        "gae_lambda": 0.8,
        "ent_coef": 0.0,
        "clip_value": False,
        "norm_adv": False,  # normalising noise-only advantages of a solved policy: 435.5 vs 487.5
        "update_epochs": 10,
        "num_minibatches": 2,  # half the cost of 4 at no loss (487.3 on seeds not used to choose)
    },
    "eval": {"episodes": 100, "every": 40, "every_episodes": 10},  # best.pt: 499.7 over 20 seeds
}

# Pendulum without angular velocity, tuned for 100k steps; evidence in docs/benchmarks/memory.md
# (Pendulum without velocities). gamma and lr as rl-baselines3-zoo's Pendulum entries.
_PENDULUM_NOVEL: dict[str, Any] = {
    "rollout": {"envs_per_worker": 32, "fragment_length": 128},
    "model": {
        "core": {
            "n_layers": 1,
            "d_model": 32,
            "n_heads": 2,
            "d_ff": 64,
            "memory_length": 4,  # velocity is in the last steps; 16: 2 seeds in 10 settle at -300
            "gate_bias": 2.0,
        },
        "normalize_reward": True,  # -16..0 per step swamps the value head: -1,079 without
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

# LunarLander without velocities: rl-baselines3-zoo's RecurrentPPO entry for LunarLanderNoVel,
# 128-step fragments; evidence in docs/benchmarks/memory.md (LunarLander without velocities).
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
    "eval": {"episodes": 100, "deterministic": False},  # greedy policies hover: -12, -68 vs 255
}

# Gymnasium's MuJoCo tasks: normalised observations, as SB3 users add VecNormalize (Hopper-v5,
# 500k steps: 868 without, 2,099 with; off elsewhere: docs/benchmarks/defaults.md).
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
