"""One :meth:`DTPolicy.step` as a traceable module: the context window kept with tensor ops.

:class:`~rlformer.algos.dt.policy.DTPolicy` keeps each row's window in numpy
arrays and edits them with boolean indexing; a graph cannot branch on data, so here every edit
is a select: rows whose episode starts are cleared with ``torch.where``, the window slides with
a concatenation (plain DT) or restarts at ``step % K == 0`` (memory DT), the current step is
written through a one-hot of its position, and a memory DT's window-completion forward runs at
every step, its memory taken only by the rows whose window is complete. Normalisation, the
return scale and the action bounds are constants of the graph.

Inputs: ``obs [B, *obs_shape]`` (float32) for a DT that reads flat vectors, else one input per
observation leaf as PPO's exports take them (``obs.<leaf path>`` in the leaf's dtype),
``episode_start [B]``, ``reward [B]`` (each row's reward for its last action),
``action_mask [B, n]`` (Discrete, MultiDiscrete: one entry per logit), ``noise [B, act_dim]``
(DTs with logits and online DTs: zeros play the most likely action; Gumbel noise samples
Discrete and MultiDiscrete logits, logistic noise MultiBinary bits, standard normal noise an
online DT's squashed Gaussian), then the state:

==================  ======================  ====================================
state               shape                   initial value
==================  ======================  ====================================
``states``          ``[B, K, state_dim]``   0 (normalised states of the window; per
                                            leaf ``states.<leaf path> [B, K, *leaf]`` in
                                            the leaf's window dtype: StateLayout)
``actions``         ``[B, K]`` / ``[B, K, A]``  0 (model space: indices, bits or [-1, 1])
``returns_to_go``   ``[B, K]``              0 (unscaled)
``timesteps``       ``[B, K]`` int64        0
``valid``           ``[B, K]`` bool         False
``step``            ``[B]`` int64           0
``last_return``     ``[B]``                 0
``target``          ``[B]``                 the target return
``memory``          ``[B, L, M, d]``        0 (memory DT only)
``memory_valid``    ``[B, M]`` bool         False (memory DT only)
==================  ======================  ====================================

Outputs: ``action`` (env format), ``logits`` (Discrete, MultiDiscrete, MultiBinary) or
``prediction`` (continuous, in [-1, 1]), an online DT's ``mean`` and ``log_std`` (its
Gaussian before tanh), ``input_valid [B]`` (False for a row with a non-finite
observation value or a mask that allows no action; its other outputs mean nothing), and
``next_<state>`` for each state.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlformer.algos.dt.policy import DTContext, DTPolicy
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
from rlformer.networks.decision_transformer import DecisionTransformer
from rlformer.networks.distributions import mask_logits
from rlformer.networks.dt_spaces import action_start
from rlformer.networks.spaces import Tree


class DTStepModule(nn.Module):
    """``forward(*inputs)`` in the order of :attr:`inputs` -> tensors in that of :attr:`outputs`."""

    def __init__(self, policy: DTPolicy) -> None:
        super().__init__()
        self.model: DecisionTransformer = traceable_copy(policy.model)  # type: ignore[assignment]
        model = self.model
        self.kind = model.action_kind
        self.window, self.carry_memory = policy.window, policy.carry_memory
        self.return_scale = float(policy.return_scale)
        self.register_buffer("state_mean", torch.as_tensor(np.asarray(policy.state_mean)))
        self.register_buffer("state_std", torch.as_tensor(np.asarray(policy.state_std)))
        self.bounded = self.kind == "box" and policy.action_low is not None
        if self.bounded:
            self.register_buffer("action_low", torch.as_tensor(policy.action_low))
            self.register_buffer("action_high", torch.as_tensor(policy.action_high))
        self.sampled = self.kind != "box" or model.stochastic
        self.layout = policy.layout
        self.action_space = policy.action_space
        self._register_starts(policy)
        space = policy.observation_space
        if self.layout.flat:
            if space is None:  # a DT built in code: its states are flat vectors
                space = gym.spaces.Box(-np.inf, np.inf, (model.state_dim,), np.float32)
            self.leaves: dict[str, gym.Space] = {"": space}
        else:
            self.leaves = self.layout.leaves
        self.state_names = {path: _state_name(path) for path in self.leaves}
        self.window_names = [*self.state_names.values(), *_WINDOW[1:]]
        self.inputs = self._input_specs(policy)
        self.states = [spec for spec in self.inputs if spec.role == "state"]
        preds = TensorSpec(
            "prediction" if self.kind == "box" else "logits", (BATCH, model.act_dim), "float32"
        )
        gaussian = []
        self.gaussian_outputs = self.kind == "box" and model.stochastic
        if self.gaussian_outputs:  # an online DT: its Gaussian before tanh
            gaussian = [
                TensorSpec(n, (BATCH, model.act_dim), "float32") for n in ("mean", "log_std")
            ]
        self.outputs = [
            self._action_spec(),
            preds,
            *gaussian,
            input_valid_spec(),
            *(spec.next_state() for spec in self.states),
        ]

    def _register_starts(self, policy: DTPolicy) -> None:
        """Constants of the graph: what the env adds to the model's indices, per discrete
        observation leaf and for the actions."""
        layout = self.layout
        for index, path in enumerate(layout.leaves):
            if layout.kinds[path] in ("discrete", "multidiscrete"):
                self.register_buffer(f"leaf{index}_start", torch.as_tensor(layout.starts(path)))
        start = np.asarray(action_start(policy.action_space), dtype=np.int64).reshape(-1)
        self.shifted = bool(start.any())
        if self.shifted:
            self.register_buffer("action_start", torch.as_tensor(start))

    def _action_spec(self) -> TensorSpec:
        model, space = self.model, self.action_space
        if self.kind == "discrete":
            return TensorSpec("action", (BATCH,), "int64")
        if self.kind == "box":
            return TensorSpec("action", (BATCH, model.act_dim), "float32")
        if self.kind == "multidiscrete":
            dtype = np.dtype(space.dtype if space is not None else np.int64).name
            return TensorSpec("action", (BATCH, len(model.action_nvec)), dtype)
        shape = tuple(space.shape) if space is not None else (model.act_dim,)
        dtype = np.dtype(space.dtype if space is not None else np.int8).name
        return TensorSpec("action", (BATCH, *shape), dtype)

    def _input_specs(self, policy: DTPolicy) -> list[TensorSpec]:
        model, w = self.model, self.window
        if self.layout.flat:
            observations = [
                TensorSpec("obs", (BATCH, *self.leaves[""].shape), "float32", "observation", "")
            ]
            states = [state_spec("states", (w, model.state_dim), "float32", 0.0)]
        else:
            assert policy.observation_space is not None
            observations = observation_specs(policy.observation_space, self.leaves)
            states = [
                state_spec(
                    self.state_names[path],
                    (w, *leaf.shape),
                    np.dtype(self.layout.window_dtype(path)).name,
                    0.0 if self.layout.kinds[path] == "vector" else 0,
                )
                for path, leaf in self.leaves.items()
            ]
        specs = [
            *observations,
            TensorSpec("episode_start", (BATCH,), "bool", "episode_start"),
            input_spec("reward", (BATCH,), "float32"),
        ]
        if self.kind in ("discrete", "multidiscrete"):
            specs.append(input_spec("action_mask", (BATCH, model.act_dim), "bool"))
        if self.sampled:
            specs.append(input_spec("noise", (BATCH, model.act_dim), "float32"))
        action_shape = {
            "discrete": (w,),
            "multidiscrete": (w, len(model.action_nvec)),
        }.get(self.kind, (w, model.act_dim))
        specs += [
            *states,
            state_spec("actions", action_shape, "float32", 0.0),
            state_spec("returns_to_go", (w,), "float32", 0.0),
            state_spec("timesteps", (w,), "int64", 0),
            state_spec("valid", (w,), "bool", False),
            state_spec("step", (), "int64", 0),
            state_spec("last_return", (), "float32", 0.0),
            state_spec("target", (), "float32", "target_return"),
        ]
        if self.carry_memory:
            cfg = model.core.cfg
            specs += [
                state_spec(
                    "memory", (cfg.n_layers, cfg.memory_length, cfg.d_model), "float32", 0.0
                ),
                state_spec("memory_valid", (cfg.memory_length,), "bool", False),
            ]
        return specs

    # ------------------------------------------------------------------ graph
    def mask_components(self) -> list[int]:
        """The sizes of the action mask's components (one for Discrete)."""
        model = self.model
        return list(model.action_nvec) if self.kind == "multidiscrete" else [model.act_dim]

    def metadata(self, policy: Any) -> dict[str, Any]:
        """``policy.json`` for this step of ``policy``."""
        return dt_metadata(policy, self)

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = {spec.name: t for spec, t in zip(self.inputs, tensors, strict=True)}
        starts = x["episode_start"]
        step = torch.where(starts, 0, x["step"])
        window = {name: _clear_rows(x[name], starts) for name in self.window_names}
        memory = None
        if self.carry_memory:
            memory = Memory(x["memory"].transpose(0, 1), x["memory_valid"] & ~starts[:, None])
        returns = torch.where(starts, x["target"], x["last_return"] - x["reward"])
        observed = self._observed(x, starts.shape[0])
        positions = torch.arange(self.window, device=starts.device)
        if self.carry_memory:
            position = step % self.window
            fresh = position == 0  # a new window: the previous one lives on in memory
            window = {name: _clear_rows(value, fresh) for name, value in window.items()}
        else:  # slide the window by one step
            position = torch.full_like(step, self.window - 1)
            window = {name: _slide(value) for name, value in window.items()}
        at = positions[None] == position[:, None]  # [B, K] one-hot of each row's position
        for name, value in observed.items():
            window[name] = _write(window[name], at, value)
        window["actions"] = _write(window["actions"], at, torch.zeros_like(window["actions"][:, 0]))
        window["returns_to_go"] = _write(window["returns_to_go"], at, returns)
        window["timesteps"] = _write(window["timesteps"], at, step)
        window["valid"] = window["valid"] | at
        preds, out = self._predict(window, memory, position)
        if "action_mask" in x:
            preds = mask_logits(preds, x["action_mask"])
        env_action, chosen = self._choose(preds, out, position, x.get("noise"))
        window["actions"] = _write(window["actions"], at, chosen.to(window["actions"].dtype))
        next_state = {name: window[name] for name in self.window_names}
        next_state.update(step=step + 1, last_return=returns, target=x["target"])
        if memory is not None:
            memory = self._carry(window, memory, position == self.window - 1)
            next_state.update(memory=memory.hidden.transpose(0, 1), memory_valid=memory.valid)
        states = [next_state[spec.name] for spec in self.states]
        gaussian = [part.float() for part in out] if self.gaussian_outputs else []
        return (env_action, preds, *gaussian, self._input_valid(x), *states)

    def graph_state(self, state: DTContext) -> dict[str, np.ndarray]:
        """A :class:`DTPolicy` context as this step's state inputs (episodes begun in
        PyTorch continue in the graph)."""
        out: dict[str, object] = {}
        if isinstance(state.states, dict):
            out.update({self.state_names[p]: leaf for p, leaf in state.states.items()})
        else:
            out["states"] = state.states
        for name in ("actions", "returns_to_go", "timesteps", "valid"):
            out[name] = getattr(state, name)
        out.update(step=state.step, last_return=state.last_return, target=state.target)
        if self.carry_memory:
            n, cfg = len(state.step), self.model.core.cfg
            memory = state.memory or Memory.empty(cfg.n_layers, n, cfg.memory_length, cfg.d_model)
            out["memory"] = memory.hidden.detach().cpu().transpose(0, 1).numpy()
            out["memory_valid"] = memory.valid.cpu().numpy()
        dtypes = {spec.name: spec.dtype for spec in self.states}
        return {name: np.ascontiguousarray(value, dtypes[name]) for name, value in out.items()}

    def _input_valid(self, x: dict[str, torch.Tensor]) -> torch.Tensor:
        obs = [x[spec.name] for spec in self.inputs if spec.role == "observation"]
        nvec = list(self.model.action_nvec) if self.kind == "multidiscrete" else []
        nvec = [self.model.act_dim] if self.kind == "discrete" else nvec
        return input_valid(obs, x.get("action_mask"), nvec)

    def _observed(self, x: dict[str, torch.Tensor], batch: int) -> dict[str, torch.Tensor]:
        """This step's observation as the window keeps it, by state name: standardised
        vectors, discrete leaves from 0, images and bits as uint8."""
        if self.layout.flat:
            raw = x["obs"].reshape(batch, -1)
            mean, std = self.state_mean, self.state_std
            return {"states": ((raw.to(mean.dtype) - mean) / std).float()}
        observed, offset = {}, 0
        specs = {spec.leaf: spec.name for spec in self.inputs if spec.role == "observation"}
        for index, (path, leaf) in enumerate(self.leaves.items()):
            raw, kind = x[specs[path]], self.layout.kinds[path]
            if kind == "vector":
                size = self.layout.sizes[path]
                mean = self.state_mean[offset : offset + size]
                std = self.state_std[offset : offset + size]
                flat = ((raw.reshape(batch, -1).to(mean.dtype) - mean) / std).float()
                value = flat.reshape(batch, *leaf.shape)
                offset += size
            elif kind in ("discrete", "multidiscrete"):
                value = raw.long() - getattr(self, f"leaf{index}_start")
            else:
                value = raw.to(torch.uint8)
            observed[self.state_names[path]] = value
        return observed

    def _states(self, window: dict[str, torch.Tensor]) -> Tree:
        """The window's states as the model takes them (an array, or a dict of leaves)."""
        if self.layout.flat or not self.layout.composite:
            return window["states"]
        return {path: window[name] for path, name in self.state_names.items()}

    def _run(self, window: dict[str, torch.Tensor], memory: Memory | None):  # noqa: ANN202
        actions = window["actions"]
        indices = self.kind in ("discrete", "multidiscrete")
        return self.model(
            self._states(window),
            actions.long() if indices else actions,
            (window["returns_to_go"] / self.return_scale)[..., None],
            window["timesteps"],
            window["valid"],
            memory=memory,
        )

    def _predict(
        self, window: dict[str, torch.Tensor], memory: Memory | None, position: torch.Tensor
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """The prediction at each row's position, and the rows' Gaussian (online DT)."""
        out = self._run(window, memory)
        preds = _at(out.action_preds, position).float()
        if out.action_mean is None or out.action_log_std is None:
            return preds, ()
        return preds, (_at(out.action_mean, position), _at(out.action_log_std, position))

    def _choose(
        self,
        preds: torch.Tensor,
        gaussian: tuple[torch.Tensor, ...],
        position: torch.Tensor,
        noise: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(env action, model-space action), as ``DTPolicy._choose`` computes them."""
        if self.kind == "discrete":
            chosen = preds.argmax(-1) if noise is None else (preds + noise).argmax(-1)
            return (chosen + self.action_start[0] if self.shifted else chosen), chosen
        if self.kind in ("multidiscrete", "multibinary"):
            return self._choose_components(preds if noise is None else preds + noise)
        action = preds
        if gaussian and noise is not None:
            mean, log_std = gaussian
            action = torch.tanh(mean.float() + log_std.float().exp() * noise)
        if not self.bounded:
            return action, action
        low, high = self.action_low, self.action_high
        env_action = low + (action + 1.0) * 0.5 * (high - low)
        return env_action, 2.0 * (env_action - low) / (high - low) - 1.0

    def _choose_components(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """MultiDiscrete: each component's best (noisy) logit; MultiBinary: each bit whose
        (noisy) logit is positive. Returns (env action, model-space action)."""
        spec = self.outputs[0]
        dtype = getattr(torch, spec.dtype)
        if self.kind == "multibinary":
            bits = (scores > 0).long()
            return bits.to(dtype).reshape(-1, *spec.shape[1:]), bits
        parts = scores.split(self.model.action_nvec, dim=-1)
        chosen = torch.stack([part.argmax(-1) for part in parts], dim=-1)
        env_action = chosen + self.action_start if self.shifted else chosen
        return env_action.to(dtype), chosen

    def _carry(
        self, window: dict[str, torch.Tensor], memory: Memory, complete: torch.Tensor
    ) -> Memory:
        """Rows whose window is complete take that window's memory (computed for every row)."""
        new = self._run(window, memory).memory
        take = complete[:, None]  # boolean selects as logic ops: onnxruntime has no bool Where
        return Memory(
            torch.where(complete[None, :, None, None], new.hidden, memory.hidden),
            (take & new.valid) | (~take & memory.valid),
        )


_WINDOW = ("states", "actions", "returns_to_go", "timesteps", "valid")


def _state_name(path: str) -> str:
    """A leaf's window state: ``states``, or ``states.<leaf path>`` with dots for slashes."""
    return "states" if path == "" else "states." + path.replace("/", ".")


def _rows(mask: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``mask [B]`` shaped to broadcast over ``value [B, ...]``."""
    return mask.reshape(-1, *([1] * (value.dim() - 1)))


def _clear_rows(value: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    if value.dtype == torch.bool:  # onnxruntime has no boolean Where
        return value & ~_rows(rows, value)
    return torch.where(_rows(rows, value), torch.zeros_like(value), value)


def _slide(value: torch.Tensor) -> torch.Tensor:
    """The window moved one step to the left, its last step zero."""
    return torch.cat([value[:, 1:], torch.zeros_like(value[:, :1])], dim=1)


def _write(window: torch.Tensor, at: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``window[b, position_b] = value[b]`` for every row, with ``at [B, K]`` the positions."""
    mask = at.reshape(*at.shape, *([1] * (window.dim() - 2)))
    return torch.where(mask, value[:, None].to(window.dtype), window)


def _at(values: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    """``values[b, position_b]`` for ``values [B, K, n]``."""
    index = position[:, None, None].expand(-1, 1, values.shape[-1])
    return values.gather(1, index)[:, 0]


def export_step(policy: Any) -> DTStepModule:
    """The traceable step of a Decision Transformer policy (offline or online)."""
    if not isinstance(policy, DTPolicy):
        raise TypeError(f"a dt policy is a DTPolicy, not {type(policy).__name__}")
    return DTStepModule(policy)


NOISE_KINDS = {
    "discrete": "gumbel",  # Gumbel-max: argmax(logits + G) is a softmax sample
    "multidiscrete": "gumbel",  # per component
    "multibinary": "logistic",  # logit + L > 0 with probability sigmoid(logit)
    "box": "normal",  # the online DT's Gaussian before tanh
}


def dt_metadata(policy: DTPolicy, step: DTStepModule) -> dict[str, Any]:
    """``policy.json`` of a Decision Transformer's export."""
    sampling = None
    if step.sampled:
        sampling = {
            "distribution": "noise_input",
            "noise": "noise",
            "noise_kind": NOISE_KINDS[step.kind],
            "model_action_state": None,
        }
    normalization = {
        "state_mean": to_json(np.asarray(policy.state_mean)),
        "state_std": to_json(np.asarray(policy.state_std)),
        "return_scale": step.return_scale,
        "action_low": to_json(policy.action_low),
        "action_high": to_json(policy.action_high),
    }
    if not step.layout.flat:  # the statistics cover these leaves' values, in this order
        normalization["standardized_leaves"] = list(step.layout.vector)
    return {
        **common_metadata(policy, step, "dt"),
        "window": step.window,
        "carry_memory": step.carry_memory,
        "normalization": normalization,
        "sampling": sampling,
    }
