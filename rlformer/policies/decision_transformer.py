"""Decision Transformers (plain, memory and online) as a :class:`~rlformer.policies.Policy`.

Bookkeeping per row, as in the DT paper: an episode starts with ``R_0 = target``; after reward
r_t the next step is conditioned on ``R_{t+1} = R_t - r_t`` (divided by the return scale for the
model). The state is the row's context window, explicit data like every policy's state:

* a plain DT looks at the last K steps (left-padded at the episode's start), or at the last
  ``history`` steps when set (the Online DT paper's shorter acting context);
* a memory DT fills windows of K steps aligned to the episode start and, when a window is
  complete, carries the core's memory of it into the next window: exactly how it was trained.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from rlformer.checkpoints import (
    CheckpointError,
    checkpoint_config,
    checkpoint_spaces,
    load_weights,
    require_keys,
)
from rlformer.config import TrainConfig
from rlformer.core import Memory
from rlformer.models.decision_transformer import DecisionTransformer, DTOutput
from rlformer.models.distributions import mask_logits
from rlformer.policies.base import PolicyInfo


@dataclass
class DTContext:
    """Each row's context: the steps of its current window and what conditions the next one.

    Window entries are what the model reads: normalised states, model-space actions (indices,
    or [-1, 1] when continuous), returns-to-go (unscaled), episode timesteps; ``valid`` marks
    real steps (padding is zero).
    """

    states: np.ndarray  # [n, W, state_dim] float32
    actions: np.ndarray  # [n, W] (discrete) or [n, W, act_dim], float32
    returns_to_go: np.ndarray  # [n, W] float32
    timesteps: np.ndarray  # [n, W] int64
    valid: np.ndarray  # [n, W] bool
    step: np.ndarray  # [n] int64: steps the row's episode has taken
    last_return: np.ndarray  # [n] float32: R_t of the row's last step
    target: np.ndarray  # [n] float32: the return each row's episodes aim for
    memory: Memory | None  # memory DT: the core's memory of the row's completed windows


class DTStep(NamedTuple):
    """One step of a DT policy: env-format actions, the same actions in the model's space (what
    a trajectory buffer stores), the rows' next context, and the model's prediction at each
    row's step (logits when discrete, the [-1, 1] action when continuous)."""

    env_actions: np.ndarray
    model_actions: np.ndarray
    state: DTContext
    prediction: torch.Tensor


@dataclass
class DTPolicy:
    """A trained DT plus everything needed to feed it: normalisation, return scale, context."""

    model: DecisionTransformer
    state_mean: np.ndarray
    state_std: np.ndarray
    return_scale: float
    context: int
    carry_memory: bool
    action_low: np.ndarray | None = None  # continuous actions are trained in [-1, 1]
    action_high: np.ndarray | None = None
    history: int | None = None  # plain DT: steps each action looks at (None: context)
    info: PolicyInfo | None = None
    observation_space: gym.Space | None = None
    action_space: gym.Space | None = None

    @property
    def window(self) -> int:
        """Steps fed to the model at each action."""
        return self.context if self.carry_memory or self.history is None else self.history

    def to_env_action(self, prediction: np.ndarray) -> np.ndarray:
        if self.model.discrete:
            return prediction.argmax(-1)
        if self.action_low is None or self.action_high is None:
            return prediction
        return self.action_low + (prediction + 1.0) * 0.5 * (self.action_high - self.action_low)

    def normalize_action(self, action: np.ndarray) -> np.ndarray:
        if self.model.discrete or self.action_low is None or self.action_high is None:
            return action
        return 2.0 * (action - self.action_low) / (self.action_high - self.action_low) - 1.0

    def set_act_context(self, steps: int) -> None:
        """Act on the last ``steps`` steps (a plain DT, at most its training context)."""
        name = self.info.name if self.info is not None else "this DT"
        if self.carry_memory:
            raise ValueError(f"{name} is a memory DT, which acts on whole windows")
        if steps > self.context:
            raise ValueError(
                f"{steps} steps is longer than {name}'s training context ({self.context}); "
                f"give at most {self.context}"
            )
        self.history = steps

    # ------------------------------------------------------------------ Policy
    def initial_state(self, n: int, target_return: float | None = None) -> DTContext:
        if target_return is None:
            targets = self.info.default_targets if self.info is not None else []
            if not targets:
                raise ValueError("a Decision Transformer needs a target return to act")
            target_return = targets[0]
        model, w = self.model, self.window
        action_shape = (n, w) if model.discrete else (n, w, model.act_dim)
        return DTContext(
            states=np.zeros((n, w, model.state_dim), np.float32),
            actions=np.zeros(action_shape, np.float32),
            returns_to_go=np.zeros((n, w), np.float32),
            timesteps=np.zeros((n, w), np.int64),
            valid=np.zeros((n, w), bool),
            step=np.zeros(n, np.int64),
            last_return=np.zeros(n, np.float32),
            target=np.full(n, target_return, np.float32),
            memory=None,
        )

    def act(
        self,
        obs: Any,
        state: DTContext,
        episode_start: np.ndarray,
        reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None,
        deterministic: bool = True,
        generator: torch.Generator | None = None,
    ) -> tuple[np.ndarray, DTContext]:
        if deterministic:
            generator = None
        elif generator is None:
            generator = torch.default_generator
        step = self.step(obs, state, episode_start, reward, action_mask, generator)
        return step.env_actions, step.state

    @torch.no_grad()
    def step(
        self,
        obs: Any,
        state: DTContext,
        episode_start: np.ndarray,
        reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None,
        generator: torch.Generator | None = None,
    ) -> DTStep:
        """Act on every row; sample with ``generator`` (an ODT's exploration), else play the
        most likely action."""
        model = self.model.eval()
        starts = np.asarray(episode_start, dtype=bool)
        state = self._begin_step(obs, state, starts, reward)
        position = self._position(state.step)
        out = model(*self._tensors(state), torch.as_tensor(state.valid), memory=state.memory)
        rows = torch.arange(len(position))
        at = torch.as_tensor(position)
        chosen, env_actions = self._choose(out, rows, at, action_mask, generator)
        state.actions[np.arange(len(position)), position] = chosen
        if self.carry_memory:
            state = self._carry_memory(state, position == self.window - 1)
        state.step = state.step + 1
        return DTStep(env_actions, chosen, state, out.action_preds[rows, at].float())

    # ------------------------------------------------------------------ internals
    def _position(self, step: np.ndarray) -> np.ndarray:
        """Where each row's current step sits in its window."""
        if self.carry_memory:
            return step % self.window
        return np.full(step.shape, self.window - 1)

    def _begin_step(
        self, obs: Any, state: DTContext, starts: np.ndarray, reward: np.ndarray | None
    ) -> DTContext:
        """The context with this step's state and return-to-go in place (action still 0)."""
        n = len(starts)
        state = replace(
            state,
            states=state.states.copy(),
            actions=state.actions.copy(),
            returns_to_go=state.returns_to_go.copy(),
            timesteps=state.timesteps.copy(),
            valid=state.valid.copy(),
            step=np.where(starts, 0, state.step),
        )
        if starts.any():
            state.states[starts] = 0.0
            state.actions[starts] = 0.0
            state.returns_to_go[starts] = 0.0
            state.timesteps[starts] = 0
            state.valid[starts] = False
            if state.memory is not None:
                state.memory = state.memory.reset(torch.as_tensor(starts))
        if not starts.all() and reward is None:
            raise ValueError("a return-conditioned policy needs the reward of its last action")
        returns = np.zeros(n, np.float32)
        returns[:] = state.target
        if not starts.all():
            assert reward is not None
            rest = ~starts
            returns[rest] = state.last_return[rest] - np.asarray(reward)[rest]
        state.last_return = returns
        raw = np.asarray(obs, np.float32).reshape(n, -1)
        normalised = ((raw - self.state_mean) / self.state_std).astype(np.float32)
        position = self._position(state.step)
        if self.carry_memory:
            fresh = position == 0  # a new window: the previous one lives on in memory
            for name, fill in (("states", 0.0), ("actions", 0.0), ("returns_to_go", 0.0)):
                getattr(state, name)[fresh] = fill
            state.timesteps[fresh] = 0
            state.valid[fresh] = False
        else:  # slide the window by one step
            for name in ("states", "actions", "returns_to_go", "timesteps", "valid"):
                array = getattr(state, name)
                array[:, :-1] = array[:, 1:].copy()
                array[:, -1] = 0
        rows = np.arange(n)
        state.states[rows, position] = normalised
        state.actions[rows, position] = 0.0
        state.returns_to_go[rows, position] = returns
        state.timesteps[rows, position] = state.step
        state.valid[rows, position] = True
        return state

    def _tensors(self, state: DTContext) -> tuple[torch.Tensor, ...]:
        """The model's inputs for the rows' windows."""
        actions = torch.as_tensor(state.actions)
        return (
            torch.as_tensor(state.states),
            actions.long() if self.model.discrete else actions,
            torch.as_tensor(state.returns_to_go / self.return_scale)[..., None],
            torch.as_tensor(state.timesteps),
        )

    def _choose(
        self,
        out: DTOutput,
        rows: torch.Tensor,
        position: torch.Tensor,
        action_mask: np.ndarray | None,
        generator: torch.Generator | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each row's action at its position: (model space, env space)."""
        model = self.model
        preds = out.action_preds[rows, position].float()
        if action_mask is not None:
            if not model.discrete:
                raise ValueError("action masks apply to Discrete actions, not a continuous DT")
            preds = mask_logits(preds, torch.as_tensor(action_mask))
        if generator is None:
            env_actions = self.to_env_action(preds.numpy())
            if model.discrete:
                return np.asarray(env_actions), env_actions
            return self.normalize_action(np.asarray(env_actions, np.float32)), env_actions
        if model.discrete:
            chosen = torch.multinomial(torch.softmax(preds, -1), 1, generator=generator)[:, 0]
            return chosen.numpy(), chosen.numpy()
        if out.action_mean is None or out.action_log_std is None:
            raise ValueError(f"cannot sample actions: {sampling_problem(model)}")
        mean = out.action_mean[rows, position].float()
        std = out.action_log_std[rows, position].float().exp()
        noise = torch.randn(mean.shape, generator=generator)
        chosen = torch.tanh(mean + std * noise).numpy()
        return chosen, self.to_env_action(chosen)

    def _carry_memory(self, state: DTContext, complete: np.ndarray) -> DTContext:
        """Rows whose window is complete (its actions known) take that window's memory."""
        if not complete.any():
            return state
        out = self.model(*self._tensors(state), torch.as_tensor(state.valid), memory=state.memory)
        if complete.all():
            return replace(state, memory=out.memory)
        old = state.memory or self.model.initial_memory(len(complete))
        take = torch.as_tensor(complete)
        memory = Memory(
            torch.where(take[None, :, None, None], out.memory.hidden, old.hidden),
            torch.where(take[:, None], out.memory.valid, old.valid),
        )
        return replace(state, memory=memory)


def sampling_problem(model: DecisionTransformer) -> str | None:
    """Why ``model`` has no action distribution to sample from, or None if it has one.

    A discrete DT samples its softmax and an online DT its squashed Gaussian; a plain DT with
    continuous actions regresses one action per step.
    """
    if model.discrete or model.stochastic:
        return None
    return (
        "a Decision Transformer with continuous actions predicts one action per step, not a "
        "distribution to sample (an online DT, algo: odt, has one)"
    )


def action_bounds(space: gym.Space) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Finite Box bounds used to train continuous actions in [-1, 1] (None otherwise)."""
    if (
        isinstance(space, gym.spaces.Box)
        and np.isfinite(space.low).all()
        and np.isfinite(space.high).all()
    ):
        return space.low.astype(np.float32).reshape(-1), space.high.astype(np.float32).reshape(-1)
    return None, None


def build_dt(
    cfg: TrainConfig, observation_space: gym.Space, action_space: gym.Space
) -> DecisionTransformer:
    """The DT a config describes for these spaces (an online DT's has a learned spread)."""
    discrete = isinstance(action_space, gym.spaces.Discrete)
    act_dim = int(action_space.n) if discrete else int(np.prod(action_space.shape))
    state_dim = int(np.prod(observation_space.shape))
    return DecisionTransformer(
        state_dim,
        act_dim,
        discrete,
        cfg.dt.core,
        cfg.dt.max_timestep,
        stochastic=cfg.algo == "odt",  # ODT's policy is a distribution with a learned spread
    )


def stored_array(value: Any) -> np.ndarray | None:
    """Tensors (format 2) and numpy arrays (format 1) alike; None stays None."""
    if value is None:
        return None
    return value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def load_dt_policy(
    payload: dict[str, Any], path: str | Path = "checkpoint"
) -> tuple[DTPolicy, TrainConfig]:
    """A ready-to-run DT policy from a checkpoint payload (``kind == "dt"``)."""
    cfg = checkpoint_config(payload, path)
    observation_space, action_space = checkpoint_spaces(payload, path)
    require_keys(payload, path, "normalization")
    model = build_dt(cfg, observation_space, action_space)
    load_weights(model, payload, path)
    stats = payload["normalization"]
    info = PolicyInfo(
        str(path),
        "dt",
        training_env=cfg.env,
        return_conditioned=True,
        default_targets=list(cfg.dt.target_returns),
        dataset_returns=payload.get("dataset_returns"),
        sampling_problem=sampling_problem(model),
    )
    try:
        policy = DTPolicy(
            model,
            stored_array(stats["state_mean"]),
            stored_array(stats["state_std"]),
            cfg.dt.return_scale,
            cfg.dt.context,
            carry_memory=cfg.dt.memory_segments > 0,
            action_low=stored_array(stats["action_low"]),
            action_high=stored_array(stats["action_high"]),
            history=cfg.dt.act_context,
            info=info,
            observation_space=observation_space,
            action_space=action_space,
        )
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        raise CheckpointError(f"{path}: malformed normalization entry ({err})") from None
    return policy, cfg


def dt_policy(payload: dict[str, Any], name: str) -> DTPolicy:
    """The policy a DT or ODT checkpoint (``kind: dt``) holds."""
    return load_dt_policy(payload, name)[0]
