"""One ``act`` step of a PPO actor as a traceable module (what ``rlformer export`` writes).

The step is the actor half of :meth:`ActorCritic.act` with everything the Python side of
:class:`~rlformer.algos.ppo.policy.ActorCriticPolicy` adds folded in: the previous reward's
scaling by the reward normaliser, the action mask, the deterministic action in the env's format
(``start`` added, Box clipped). The state is explicit and batch-first:

==========  =====================================================  ==============
torso       state inputs (``next_<name>`` out)                     initial value
==========  =====================================================  ==============
gtrxl       per layer l: ``memory.<l> [B, M, d]``,                 0
            ``memory_keys.<l>``, ``memory_values.<l> [B, H, M, h]``;  0
            ``memory_valid [B, M]``                                False
lstm        ``h [B, layers, H]``, ``c [B, layers, H]``              0
gru         ``h [B, layers, H]``                                    0
mlp         none
==========  =====================================================  ==============

``memory_keys`` / ``memory_values`` hold each memory slot's attention keys and values by head
(what eager inference keeps in the core's projection cache), so a step projects its new token
only, not all M slots, and reads them where they lie; one tensor per layer, because a graph
copies every slice it takes of a larger one.
Plus ``prev_action`` (model format: 0-based indices, the unclipped Box sample) when the model
reads the previous action and reward. Besides the distribution's parameters, the action and
the next state, the step outputs ``input_valid [B]``: False for a row with a non-finite
observation value or an action mask that allows no action (in some component); such a row's
other outputs mean nothing. The critic is not exported; sampling stays with the runner, which
then writes its sampled action into ``next_prev_action``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlformer.core import Memory
from rlformer.export.metadata import common_metadata
from rlformer.export.spec import (
    BATCH,
    TensorSpec,
    input_spec,
    input_valid,
    input_valid_spec,
    observation_specs,
    state_spec,
    to_json,
    traceable_copy,
)
from rlformer.networks.actor_critic import ActorCritic, AgentState
from rlformer.networks.distributions import Bernoulli, Categorical, DiagGaussian, MultiCategorical
from rlformer.networks.recurrent import RecurrentState, RecurrentTorso
from rlformer.networks.torso import GTrXLTorso


class ActorStep(nn.Module):
    """``forward(*inputs)`` in the order of :attr:`inputs` -> tensors in that of :attr:`outputs`."""

    def __init__(self, model: ActorCritic) -> None:
        super().__init__()
        self.model: ActorCritic = traceable_copy(model)  # type: ignore[assignment]
        # What the actor reads: a centralised critic's inputs are no input of the graph.
        self.leaves = dict(model.encoder.leaves)
        dist = self.model.dist
        self.masked = isinstance(dist, (Categorical, MultiCategorical))
        self.reward_scale = None
        if model.reward_norm is not None:
            self.reward_scale = (model.reward_norm.scale(), float(model.reward_clip))
        self.states = self._state_specs()
        self.inputs = [
            *observation_specs(model.observation_space, self.leaves),
            TensorSpec("episode_start", (BATCH,), "bool", "episode_start"),
        ]
        if model.prev_action_reward:
            self.inputs.append(input_spec("reward", (BATCH,), "float32"))
        if self.masked:
            self.inputs.append(input_spec("action_mask", (BATCH, dist.param_dim), "bool"))
        self.inputs += self.states
        self.outputs = [*self._param_specs(), self._action_spec(), input_valid_spec()]
        self.outputs += [spec.next_state() for spec in self.states]
        self._register_env_format()

    # ------------------------------------------------------------------ specs
    def _state_specs(self) -> list[TensorSpec]:
        torso = self.model.actor_torso
        specs = []
        if isinstance(torso, GTrXLTorso):
            cfg = torso.core.cfg
            layers, slots, heads = range(cfg.n_layers), cfg.memory_length, cfg.n_heads
            specs += [
                state_spec(f"memory.{i}", (slots, cfg.d_model), "float32", 0.0) for i in layers
            ]
            specs.append(state_spec("memory_valid", (slots,), "bool", False))
            for name in ("memory_keys", "memory_values"):
                shape = (heads, slots, cfg.d_head)
                specs += [state_spec(f"{name}.{i}", shape, "float32", 0.0) for i in layers]
        elif isinstance(torso, RecurrentTorso):
            specs.append(state_spec("h", (torso.layers, torso.out_dim), "float32", 0.0))
            if torso.kind == "lstm":
                specs.append(state_spec("c", (torso.layers, torso.out_dim), "float32", 0.0))
        if self.model.prev_action_reward:
            dist = self.model.dist
            dtype = "int64" if dist.action_dtype == torch.int64 else "float32"
            specs.append(state_spec("prev_action", dist.action_shape, dtype, 0))
        return specs

    def _param_specs(self) -> list[TensorSpec]:
        dist = self.model.dist
        if isinstance(dist, DiagGaussian):
            return [
                TensorSpec("mean", (BATCH, dist.param_dim), "float32"),
                TensorSpec("log_std", (BATCH, dist.param_dim), "float32"),
            ]
        return [TensorSpec("logits", (BATCH, dist.param_dim), "float32")]

    def _action_spec(self) -> TensorSpec:
        space = self.model.action_space
        dtype = np.dtype(space.dtype if space.dtype is not None else np.int64)
        if isinstance(space, gym.spaces.Discrete):
            dtype = np.dtype(np.int64)  # what ActorCriticPolicy returns (start added)
        return TensorSpec("action", (BATCH, *space.shape), dtype.name)

    def _register_env_format(self) -> None:
        """Constants of the env format: per-component starts, Box bounds in the space's dtype."""
        space, dist = self.model.action_space, self.model.dist
        if isinstance(dist, (Categorical, MultiCategorical)):
            start = np.asarray(dist.start, dtype=np.int64).reshape(-1)
            self.register_buffer("action_start", torch.as_tensor(start))
        elif isinstance(dist, DiagGaussian):
            dtype = np.dtype(space.dtype)
            self.register_buffer("action_low", torch.as_tensor(space.low.reshape(-1).astype(dtype)))
            self.register_buffer(
                "action_high", torch.as_tensor(space.high.reshape(-1).astype(dtype))
            )

    # ------------------------------------------------------------------ graph
    def mask_components(self) -> list[int]:
        """The sizes of the action mask's components (one for Discrete)."""
        dist = self.model.dist
        return [dist.n] if isinstance(dist, Categorical) else list(dist.nvec)

    def metadata(self, policy: Any) -> dict[str, Any]:
        """``policy.json`` for this step of ``policy``."""
        return ppo_metadata(policy, self)

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        named = {spec.name: t for spec, t in zip(self.inputs, tensors, strict=True)}
        model, dist = self.model, self.model.dist
        obs_specs = [s for s in self.inputs if s.role == "observation"]
        obs = (
            named["obs"]
            if obs_specs[0].leaf == ""
            else {spec.leaf: named[spec.name] for spec in obs_specs}
        )
        start = named["episode_start"]
        prev_action = named.get("prev_action")
        prev_reward = self._scaled_reward(named["reward"]) if "reward" in named else None
        x = model._features(obs, prev_action, prev_reward, start)
        latent, next_state = self._torso_step(x, named, start)
        params = model.policy_head(latent)
        if self.masked:
            params = dist.masked(params, named["action_mask"])
        action = dist.sample(params, True, None)
        outputs = [params]
        if isinstance(dist, DiagGaussian):
            outputs.append(dist.log_std.expand_as(params))
        outputs.append(self._env_action(action))
        outputs.append(self._input_valid(named))
        outputs += next_state
        if model.prev_action_reward:
            outputs.append(action.to(dist.action_dtype))
        return tuple(outputs)

    def _scaled_reward(self, reward: torch.Tensor) -> torch.Tensor:
        """:meth:`ActorCritic.scale_rewards` as graph operations (float64 like it)."""
        if self.reward_scale is None:
            return reward
        scale, clip = self.reward_scale
        return (reward.double() * scale).clamp(-clip, clip).float()

    def _torso_step(
        self, x: torch.Tensor, named: dict[str, torch.Tensor], start: torch.Tensor
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The torso's output and its next state inputs (batch-first; the model keeps layers
        first)."""
        torso = self.model.actor_torso
        if isinstance(torso, GTrXLTorso):
            layers = range(torso.core.cfg.n_layers)
            out, hidden, valid, keys, values = torso.core.step_cached(
                torso.embed(x),
                [named[f"memory.{i}"] for i in layers],
                named["memory_valid"],
                [named[f"memory_keys.{i}"] for i in layers],
                [named[f"memory_values.{i}"] for i in layers],
                start,
            )
            return out, [*hidden, valid, *keys, *values]
        if isinstance(torso, RecurrentTorso):
            c = named["c"].transpose(0, 1) if "c" in named else None
            state = RecurrentState(named["h"].transpose(0, 1), c)
            out, memory = torso.step_unfused(x, state, start)
            parts = [memory.h] if memory.c is None else [memory.h, memory.c]
            return out, [part.transpose(0, 1) for part in parts]
        out, _ = torso.step(x, None, start)
        return out, []

    def _input_valid(self, named: dict[str, torch.Tensor]) -> torch.Tensor:
        """``input_valid [B]``: finite observations and an action allowed in every component."""
        obs = [named[s.name] for s in self.inputs if s.role == "observation"]
        mask = named.get("action_mask")
        dist = self.model.dist
        nvec = [dist.n] if isinstance(dist, Categorical) else list(getattr(dist, "nvec", []))
        return input_valid(obs, mask, nvec)

    # ------------------------------------------------------------------ states
    def graph_state(self, state: AgentState) -> dict[str, np.ndarray]:
        """An :class:`ActorCriticPolicy` state as this step's state inputs (episodes begun in
        PyTorch continue in the graph)."""
        out: dict[str, np.ndarray] = {}
        actor = state.actor
        if isinstance(actor, Memory):
            memory = actor.to("cpu")
            with torch.no_grad():
                keys, values = self.model.actor_torso.core.project_memory(memory)
            for i, (hidden, key, value) in enumerate(zip(memory.hidden, keys, values, strict=True)):
                out[f"memory.{i}"] = hidden.float().numpy()
                out[f"memory_keys.{i}"], out[f"memory_values.{i}"] = key.numpy(), value.numpy()
            out["memory_valid"] = memory.valid.numpy()
        elif isinstance(actor, RecurrentState):
            out["h"] = actor.h.detach().cpu().transpose(0, 1).numpy()
            if actor.c is not None:
                out["c"] = actor.c.detach().cpu().transpose(0, 1).numpy()
        if state.prev_action is not None:
            out["prev_action"] = state.prev_action.cpu().numpy()
        dtypes = {spec.name: spec.dtype for spec in self.states}
        return {name: np.ascontiguousarray(value, dtypes[name]) for name, value in out.items()}

    def _env_action(self, action: torch.Tensor) -> torch.Tensor:
        """``ActionDistribution.env_action`` in graph operations."""
        space, dist = self.model.action_space, self.model.dist
        if isinstance(dist, Categorical):
            return action + self.action_start[0]
        if isinstance(dist, MultiCategorical):
            return (action + self.action_start).to(_torch_dtype(space.dtype))
        if isinstance(dist, DiagGaussian):
            clipped = torch.clamp(
                action.to(self.action_low.dtype), self.action_low, self.action_high
            )
            return clipped.reshape(-1, *space.shape)
        assert isinstance(dist, Bernoulli)
        return action.reshape(-1, *space.shape).to(_torch_dtype(space.dtype))


def _torch_dtype(dtype: np.dtype | type) -> torch.dtype:
    return getattr(torch, np.dtype(dtype).name)


def export_step(policy: Any) -> ActorStep:
    """The traceable step of a PPO policy (its actor; the critic is not exported)."""
    model = getattr(policy, "model", None)
    if not isinstance(model, ActorCritic):
        raise TypeError(f"a ppo policy holds an ActorCritic, not {type(model).__name__}")
    return ActorStep(model)


def ppo_metadata(policy: Any, step: ActorStep) -> dict[str, Any]:
    """``policy.json`` of an actor-critic's export."""
    model = policy.model
    torso = model.actor_torso
    name = "gtrxl" if isinstance(torso, GTrXLTorso) else "mlp"
    if isinstance(torso, RecurrentTorso):
        name = torso.kind
    normalization: dict[str, Any] = {
        f"obs/{path}": {
            "count": float(rms.count),
            "mean": to_json(rms.mean.numpy()),
            "var": to_json(rms.var().numpy()),
            "clip": float(model.encoder.clip),
        }
        for path, rms in model.encoder.normalized_leaves().items()
    }
    if step.reward_scale is not None:
        scale, clip = step.reward_scale
        normalization["reward"] = {"scale": scale, "clip": clip}
    return {
        **common_metadata(policy, step, "ppo"),
        "torso": name,
        "normalization": normalization,
        "sampling": _ppo_sampling(model, "prev_action" if model.prev_action_reward else None),
    }


def _ppo_sampling(model: Any, model_action_state: str | None) -> dict[str, Any]:
    dist, space = model.dist, model.action_space
    dtype = np.dtype(space.dtype if space.dtype is not None else np.int64).name
    if isinstance(dist, Categorical):
        dtype = "int64"  # what ActorCriticPolicy returns for Discrete actions
    common = {"shape": list(space.shape), "dtype": dtype, "model_action_state": model_action_state}
    if isinstance(dist, Categorical):
        return {
            "distribution": "categorical",
            "logits": "logits",
            "nvec": [dist.n],
            "start": [dist.start],
            **common,
        }
    if isinstance(dist, MultiCategorical):
        return {
            "distribution": "categorical",
            "logits": "logits",
            "nvec": list(dist.nvec),
            "start": [int(s) for s in dist.start],
            **common,
        }
    if isinstance(dist, DiagGaussian):
        return {
            "distribution": "diag_gaussian",
            "mean": "mean",
            "log_std": "log_std",
            "low": to_json(space.low.astype(np.float64).reshape(-1).tolist()),
            "high": to_json(space.high.astype(np.float64).reshape(-1).tolist()),
            **common,
        }
    assert isinstance(dist, Bernoulli)
    return {"distribution": "bernoulli", "logits": "logits", **common}
