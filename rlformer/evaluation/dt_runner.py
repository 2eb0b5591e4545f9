"""Return-conditioned evaluation of a Decision Transformer, vectorised over environments.

Bookkeeping per env slot, as in the DT paper: start with ``R_0 = target``; after reward r_t the
next step is conditioned on ``R_{t+1} = R_t - r_t`` (divided by the return scale for the model).
Plain DT looks at the last K steps (left-padded), or at the last ``history`` steps when set
(the ODT paper's shorter evaluation context); a memory DT fills windows of K steps aligned
to the episode start, carrying the core's memory from each completed window into the next, which
is exactly how it was trained.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from rlformer.config import EnvConfig
from rlformer.evaluation.runner import EpisodeResults
from rlformer.models.decision_transformer import DecisionTransformer, DTOutput
from rlformer.rollout.env_factory import env_from_config


@dataclass
class DTPolicy:
    """A trained DT plus everything needed to feed it: normalisation, scale, context."""

    model: DecisionTransformer
    state_mean: np.ndarray
    state_std: np.ndarray
    return_scale: float
    context: int
    carry_memory: bool
    action_low: np.ndarray | None = None  # continuous actions are trained in [-1, 1]
    action_high: np.ndarray | None = None
    history: int | None = None  # plain DT: steps each action looks at (None: context)

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


@dataclass
class PlayedEpisode:
    """One return-conditioned episode as played: raw observations, the model's actions
    ([-1, 1] when continuous, indices when discrete) and the rewards received."""

    observations: np.ndarray  # [n, state_dim]
    actions: np.ndarray  # [n, act_dim] float or [n] int
    rewards: np.ndarray  # [n] float64
    terminated: bool
    truncated: bool
    success: float | None


def _choose_actions(
    policy: DTPolicy, out: DTOutput, position: int, generator: torch.Generator | None
) -> tuple[np.ndarray, np.ndarray]:
    """Actions at ``position`` for every env: (model space, env space).

    Model space is what the DT is trained on: indices, or [-1, 1] when continuous. Without a
    generator the policy plays its mode; with one it samples (an ODT's exploration).
    """
    model = policy.model
    if generator is None:
        env_actions = policy.to_env_action(out.action_preds[:, position].float().numpy())
        if model.discrete:
            return np.asarray(env_actions), env_actions
        return policy.normalize_action(np.asarray(env_actions, np.float32)), env_actions
    if model.discrete:
        probabilities = torch.softmax(out.action_preds[:, position].float(), -1)
        chosen = torch.multinomial(probabilities, 1, generator=generator)[:, 0].numpy()
        return chosen, chosen
    if out.action_mean is None or out.action_log_std is None:
        raise ValueError("sampling actions needs a stochastic DT (algo: odt)")
    mean = out.action_mean[:, position].float()
    std = out.action_log_std[:, position].float().exp()
    noise = torch.randn(mean.shape, generator=generator)
    chosen = torch.tanh(mean + std * noise).numpy()
    return chosen, policy.to_env_action(chosen)


@torch.no_grad()
def play_return_conditioned(
    policy: DTPolicy,
    envs: list[gym.Env],
    target_return: float,
    seeds: list[int | None],
    generator: torch.Generator | None = None,
    max_steps: int = 10_000,
) -> list[PlayedEpisode]:
    """One episode per env in parallel, conditioned on ``target_return``.

    Args:
        seeds: Reset seed per env (None: continue the env's own RNG).
        generator: Sample actions from the policy with it (an ODT's exploration); None plays
            the most likely action.
    """
    model, k = policy.model.eval(), policy.window
    spec = envs[0].spec
    limit = min(max_steps, (spec.max_episode_steps if spec else None) or max_steps)
    n = len(envs)
    state_dim, act_dim = model.state_dim, model.act_dim
    raw = np.zeros((n, limit + 1, state_dim), np.float32)
    states = np.zeros((n, limit + 1, state_dim), np.float32)
    actions = np.zeros((n, limit + 1) if model.discrete else (n, limit + 1, act_dim), np.float32)
    rewards = np.zeros((n, limit), np.float64)
    rtg = np.zeros((n, limit + 1), np.float32)
    rtg[:, 0] = target_return
    lengths = np.zeros(n, np.int64)
    active = np.ones(n, dtype=bool)
    terminated = np.zeros(n, dtype=bool)
    successes: list[float | None] = [None] * n  # by env index
    for i, env in enumerate(envs):
        obs, _ = env.reset(seed=seeds[i])
        raw[i, 0] = np.asarray(obs, np.float32).reshape(-1)
    states[:, 0] = (raw[:, 0] - policy.state_mean) / policy.state_std
    memory = None
    for t in range(limit):
        window, mask, position = _context_window(t, k, policy.carry_memory)
        idx = np.clip(window, 0, limit)
        batch_mask = torch.as_tensor(np.broadcast_to(mask, (n, k)).copy())
        tensors = _window_tensors(states, actions, rtg, idx, batch_mask, policy, model.discrete)
        out = model(*tensors, batch_mask, memory=memory if policy.carry_memory else None)
        chosen, env_actions = _choose_actions(policy, out, position, generator)
        for i in np.flatnonzero(active):
            obs, reward, term, trunc, info = envs[i].step(env_actions[i])
            actions[i, t] = chosen[i]
            rewards[i, t] = reward
            lengths[i] += 1
            rtg[i, t + 1] = rtg[i, t] - reward
            raw[i, t + 1] = np.asarray(obs, np.float32).reshape(-1)
            states[i, t + 1] = (raw[i, t + 1] - policy.state_mean) / policy.state_std
            if term or trunc:
                active[i] = False
                terminated[i] = bool(term)
                if "is_success" in info:
                    successes[i] = float(info["is_success"])
        if policy.carry_memory and position == k - 1:
            # The window is complete (actions known): its memory feeds the next window.
            tensors = _window_tensors(states, actions, rtg, idx, batch_mask, policy, model.discrete)
            memory = model(*tensors, batch_mask, memory=memory).memory
        if not active.any():
            break
    if model.discrete:
        actions = actions.astype(np.int64)
    return [
        PlayedEpisode(
            raw[i, : lengths[i]].copy(),
            actions[i, : lengths[i]].copy(),
            rewards[i, : lengths[i]].copy(),
            bool(terminated[i]),
            not bool(terminated[i]),
            successes[i],
        )
        for i in range(n)
    ]


def _context_window(t: int, k: int, carry_memory: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """The ``k`` steps the DT sees when it acts at step ``t``: their indices, which of them
    exist yet, and where ``t`` sits among them.

    A plain DT slides a window ending at ``t`` (left-padded at the episode's start). A memory DT
    fills fixed, consecutive windows of ``k`` steps (right-padded: later steps are masked), so
    each complete window's memory can feed the next one.
    """
    if carry_memory:
        start = (t // k) * k
        window = np.arange(start, start + k)
        return window, window <= t, t - start
    window = np.arange(t - k + 1, t + 1)
    return window, window >= 0, k - 1


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


def run_return_conditioned(
    policy: DTPolicy,
    env_cfg: EnvConfig,
    target_return: float,
    episodes: int,
    seed: int = 0,
    max_steps: int = 10_000,
    deterministic: bool = True,
) -> EpisodeResults:
    """``episodes`` episodes in parallel (one env each), conditioned on ``target_return``; env
    ``i`` is reset with ``seed + i``.

    ``deterministic=False`` samples the actions (see :func:`sampling_problem`), from a generator
    seeded with ``seed``, so a sampled evaluation repeats exactly.
    """
    generator = None
    if not deterministic:
        problem = sampling_problem(policy.model)
        if problem is not None:
            raise ValueError(f"cannot sample actions: {problem}")
        generator = torch.Generator().manual_seed(seed)
    envs = [env_from_config(env_cfg) for _ in range(episodes)]
    try:
        played = play_return_conditioned(
            policy, envs, target_return, [seed + i for i in range(episodes)], generator, max_steps
        )
    finally:
        for env in envs:
            env.close()
    return EpisodeResults(
        [float(p.rewards.sum()) for p in played],
        [len(p.rewards) for p in played],
        [p.success for p in played],
    )


def _window_tensors(
    states: np.ndarray,
    actions: np.ndarray,
    rtg: np.ndarray,
    idx: np.ndarray,
    mask: torch.Tensor,
    policy: DTPolicy,
    discrete: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    keep = mask.numpy()
    s = states[:, idx] * keep[..., None]
    a = actions[:, idx] * (keep if discrete else keep[..., None])
    r = rtg[:, idx] * keep / policy.return_scale
    timesteps = np.broadcast_to(np.clip(idx, 0, None), keep.shape) * keep
    action_tensor = torch.as_tensor(a).long() if discrete else torch.as_tensor(a)
    return (
        torch.as_tensor(s),
        action_tensor,
        torch.as_tensor(r)[..., None],
        torch.as_tensor(timesteps).long(),
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
