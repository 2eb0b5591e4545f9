"""Action distributions: one per action space, behind one small interface.

=====================  ==============================  ============================  =========
action space           distribution                    stored action                 env gets
=====================  ==============================  ============================  =========
Discrete(n)            categorical over n logits       int64 ``[...]`` (0-based)     + start
Box                    diagonal Gaussian, state-free   float32 ``[..., A]`` sample   clipped
                       log-std parameter               (unclipped)                   to bounds
MultiDiscrete(nvec)    one categorical per component   int64 ``[..., K]`` (0-based)  + start
MultiBinary(n)         one Bernoulli per bit           int64 ``[..., n]``            as is
=====================  ==============================  ============================  =========

Log-probabilities and entropies of the components add up. Box actions: the Gaussian sample is
what is stored and what the log-probability is taken of; the env receives it clipped to the
space's bounds (the clipping is not part of the policy, as in SB3 and CleanRL).

Sampling takes an explicit ``torch.Generator`` so every rollout worker's action noise is
reproducible on its own.

Action masks (Discrete and MultiDiscrete, laid out as sb3-contrib lays them out: one boolean per
logit, the components' masks concatenated) set the logits of invalid actions to the lowest
finite float before sampling, log-probabilities and entropies, so an invalid action has
probability exactly 0 and adds nothing (not NaN) to the entropy.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlformer.networks.spaces import check_action_space


class ActionDistribution(nn.Module):
    """Maps policy-head outputs (``param_dim`` per step) to actions, log-probs and entropies."""

    param_dim: int
    action_shape: tuple[int, ...]  # one stored action
    action_dtype: torch.dtype
    feature_dim: int  # size of an action as a token input (previous-action feature)

    def log_prob_entropy(
        self, params: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def sample(
        self, params: torch.Tensor, deterministic: bool, generator: torch.Generator | None
    ) -> torch.Tensor:
        raise NotImplementedError

    def env_action(self, action: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def features(self, action: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def masked(self, params: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
        """``params`` with the actions ``action_mask`` marks False made impossible."""
        raise ValueError(
            f"action masks apply to Discrete and MultiDiscrete actions, not {type(self).__name__}"
        )


def mask_logits(logits: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """Logits with masked-out entries at the lowest finite value (probability 0)."""
    if action_mask.shape[-1] != logits.shape[-1]:
        raise ValueError(
            f"an action mask needs {logits.shape[-1]} entries per step, got {action_mask.shape[-1]}"
        )
    return logits.masked_fill(~action_mask.bool(), torch.finfo(logits.dtype).min)


def _categorical_log_prob_entropy(
    logits: torch.Tensor, action: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    log_p = torch.log_softmax(logits, dim=-1)
    log_prob = log_p.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
    return log_prob, -(log_p.exp() * log_p).sum(-1)


def _categorical_sample(
    logits: torch.Tensor, deterministic: bool, generator: torch.Generator | None
) -> torch.Tensor:
    if deterministic:
        return logits.argmax(-1)
    probs = torch.softmax(logits, dim=-1)
    flat = probs.reshape(-1, probs.shape[-1])
    return torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])


class Categorical(ActionDistribution):
    def __init__(self, space: gym.spaces.Discrete) -> None:
        super().__init__()
        self.n, self.start = int(space.n), int(space.start)
        self.param_dim, self.action_shape, self.action_dtype = self.n, (), torch.int64
        self.feature_dim = self.n

    def log_prob_entropy(
        self, params: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return _categorical_log_prob_entropy(params, action)

    def sample(
        self, params: torch.Tensor, deterministic: bool, generator: torch.Generator | None
    ) -> torch.Tensor:
        return _categorical_sample(params, deterministic, generator)

    def env_action(self, action: np.ndarray) -> np.ndarray:
        return action.astype(np.int64) + self.start

    def masked(self, params: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
        return mask_logits(params, action_mask)

    def features(self, action: torch.Tensor) -> torch.Tensor:
        return nn.functional.one_hot(action.long(), self.n).float()


class DiagGaussian(ActionDistribution):
    def __init__(self, space: gym.spaces.Box, log_std_init: float) -> None:
        super().__init__()
        self.space = space
        size = int(np.prod(space.shape))
        self.param_dim, self.action_shape, self.action_dtype = size, (size,), torch.float32
        self.feature_dim = size
        self.log_std = nn.Parameter(torch.full((size,), log_std_init))

    def log_prob_entropy(
        self, params: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        z = (action - params) / self.log_std.exp()
        log_prob = (-0.5 * z.pow(2) - self.log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        entropy = (0.5 + 0.5 * math.log(2 * math.pi) + self.log_std).sum().expand_as(log_prob)
        return log_prob, entropy

    def sample(
        self, params: torch.Tensor, deterministic: bool, generator: torch.Generator | None
    ) -> torch.Tensor:
        if deterministic:
            return params
        noise = torch.randn(params.shape, generator=generator, device=params.device)
        return params + noise * self.log_std.exp()

    def env_action(self, action: np.ndarray) -> np.ndarray:
        space = self.space
        clipped = np.clip(action, space.low.reshape(-1), space.high.reshape(-1))
        return clipped.reshape(-1, *space.shape).astype(space.dtype)

    def features(self, action: torch.Tensor) -> torch.Tensor:
        return action.float()


class MultiCategorical(ActionDistribution):
    def __init__(self, space: gym.spaces.MultiDiscrete) -> None:
        super().__init__()
        self.space = space
        self.nvec = [int(n) for n in np.asarray(space.nvec).reshape(-1)]
        self.start = np.asarray(space.start).reshape(-1).astype(np.int64)
        self.param_dim = self.feature_dim = sum(self.nvec)
        self.action_shape, self.action_dtype = (len(self.nvec),), torch.int64

    def log_prob_entropy(
        self, params: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        log_prob = entropy = torch.zeros(params.shape[:-1], device=params.device)
        for k, logits in enumerate(params.split(self.nvec, dim=-1)):
            lp, ent = _categorical_log_prob_entropy(logits, action[..., k])
            log_prob, entropy = log_prob + lp, entropy + ent
        return log_prob, entropy

    def sample(
        self, params: torch.Tensor, deterministic: bool, generator: torch.Generator | None
    ) -> torch.Tensor:
        parts = [
            _categorical_sample(logits, deterministic, generator)
            for logits in params.split(self.nvec, dim=-1)
        ]
        return torch.stack(parts, dim=-1)

    def env_action(self, action: np.ndarray) -> np.ndarray:
        return (action.astype(np.int64) + self.start).astype(self.space.dtype)

    def masked(self, params: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
        return mask_logits(params, action_mask)

    def features(self, action: torch.Tensor) -> torch.Tensor:
        return torch.cat(
            [
                nn.functional.one_hot(action[..., k].long(), n).float()
                for k, n in enumerate(self.nvec)
            ],
            dim=-1,
        )


class Bernoulli(ActionDistribution):
    def __init__(self, space: gym.spaces.MultiBinary) -> None:
        super().__init__()
        self.space = space
        size = int(np.prod(space.shape))
        self.param_dim, self.action_shape, self.action_dtype = size, (size,), torch.int64
        self.feature_dim = size

    def log_prob_entropy(
        self, params: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # log p(a) = a * log sigmoid(l) + (1 - a) * log sigmoid(-l) = -BCE(l, a)
        log_prob = -nn.functional.binary_cross_entropy_with_logits(
            params, action.float(), reduction="none"
        )
        p = torch.sigmoid(params)
        entropy = nn.functional.binary_cross_entropy_with_logits(params, p, reduction="none")
        return log_prob.sum(-1), entropy.sum(-1)

    def sample(
        self, params: torch.Tensor, deterministic: bool, generator: torch.Generator | None
    ) -> torch.Tensor:
        if deterministic:
            return (params > 0).long()
        uniform = torch.rand(params.shape, generator=generator, device=params.device)
        return (uniform < torch.sigmoid(params)).long()

    def env_action(self, action: np.ndarray) -> np.ndarray:
        return action.reshape(-1, *self.space.shape).astype(self.space.dtype)

    def features(self, action: torch.Tensor) -> torch.Tensor:
        return action.float()


def make_distribution(space: gym.Space, log_std_init: float = 0.0) -> ActionDistribution:
    """The distribution of an action space (raises SpaceError for unsupported ones)."""
    check_action_space(space)
    if isinstance(space, gym.spaces.Discrete):
        return Categorical(space)
    if isinstance(space, gym.spaces.Box):
        return DiagGaussian(space, log_std_init)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return MultiCategorical(space)
    assert isinstance(space, gym.spaces.MultiBinary)
    return Bernoulli(space)
