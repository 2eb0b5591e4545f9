"""Online Decision Transformer learner (Zheng, Zhang and Grover, ICML 2022).

The DT becomes a stochastic policy and is trained to maximise the likelihood of the data's
actions while keeping its entropy near a target:

    loss        = NLL(a | s, R) - alpha * H[pi(. | s, R)]       (alpha held fixed here)
    temperature = alpha * (H - H_target)                        (H held fixed here)

``alpha = exp(log_alpha)`` is learned by its own Adam optimiser, so it rises while the policy's
entropy is below the target and falls while it is above. Continuous actions use a Gaussian
squashed by tanh into [-1, 1] (its entropy has no closed form and is estimated with one
reparameterised sample per step, as in the paper); discrete actions a categorical with exact
entropy, MultiDiscrete actions one categorical per component and MultiBinary actions one
Bernoulli per bit (PPO's distributions: log-likelihoods and entropies add up over components).
Both terms average over real (unpadded) steps.

Split into chunks (``learner.accumulate``) or over replicas (``learner.num_learners``,
:class:`ShardedODTLearner`), every term is the sum of each share's real steps over the whole
batch's real-step count, as for the DT; the temperature step reads the whole batch's entropy,
so every replica takes the same step of ``alpha`` with no gradient of its own to all-reduce.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import torch
from torch import distributions as dist

from rlformer.algos.dt.config import DTConfig
from rlformer.algos.dt.learner import DTLearner
from rlformer.algos.dt.shards import ShardedDTLearner
from rlformer.algos.odt.config import ODTConfig
from rlformer.data.sampling import WindowBatch
from rlformer.networks.decision_transformer import DecisionTransformer, DTOutput
from rlformer.networks.distributions import ActionDistribution, Bernoulli, MultiCategorical
from rlformer.networks.dt_spaces import ActionKind

ACTION_EDGE = 1e-6
"""Data actions are clipped this far inside [-1, 1]: tanh never reaches the edge itself."""


def default_target_entropy(model: DecisionTransformer) -> float:
    """The paper's ``-action dimension`` for continuous actions; for ``n`` discrete actions
    ``0.3 * ln n`` (30% of a uniform policy's entropy; rlformer's choice, the paper has none),
    and 30% of the uniform policy's for MultiDiscrete (``0.3 * sum ln n_k``) and MultiBinary
    (``0.3 * n ln 2``) actions."""
    kind = getattr(model, "action_kind", "discrete" if model.discrete else "box")
    if kind == "discrete":
        return 0.3 * math.log(model.act_dim)
    if kind == "multidiscrete":
        return 0.3 * sum(math.log(n) for n in model.action_nvec)
    if kind == "multibinary":
        return 0.3 * model.act_dim * math.log(2.0)
    return -float(model.act_dim)


def action_distribution(out: DTOutput, discrete: bool) -> dist.Distribution:
    """The policy at every step: a categorical over logits, or a tanh-squashed diagonal
    Gaussian whose ``log_prob`` sums over action dimensions (``[B, K]`` either way)."""
    if discrete:
        return dist.Categorical(logits=out.action_preds.float())
    if out.action_mean is None or out.action_log_std is None:
        raise ValueError("a stochastic policy needs a DT built with stochastic=True")
    gaussian = dist.Normal(out.action_mean.float(), out.action_log_std.float().exp())
    squashed = dist.TransformedDistribution(gaussian, [dist.TanhTransform(cache_size=1)])
    return dist.Independent(squashed, 1)


def nll_and_entropy(
    out: DTOutput,
    actions: torch.Tensor,
    mask: torch.Tensor,
    discrete: bool | ActionKind,
    nvec: list[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean negative log-likelihood of ``actions`` and mean policy entropy over real steps.

    ``discrete``: a bool (discrete or continuous) or the action kind; MultiDiscrete actions
    need their ``nvec``."""
    real = mask.bool()
    if isinstance(discrete, str) and discrete in ("multidiscrete", "multibinary"):
        logits = out.action_preds.float()
        log_likelihood, entropy = _logit_distribution(discrete, logits, nvec).log_prob_entropy(
            logits, actions
        )
        return -log_likelihood[real].mean(), entropy[real].mean()
    discrete = discrete == "discrete" if isinstance(discrete, str) else discrete
    policy = action_distribution(out, discrete)
    if discrete:
        log_likelihood = policy.log_prob(actions.long())
        entropy = policy.entropy()
    else:
        data = actions.float().clamp(-1.0 + ACTION_EDGE, 1.0 - ACTION_EDGE)
        log_likelihood = policy.log_prob(data)
        sample = policy.rsample()  # entropy = -E[log pi(a)], one sample per step
        entropy = -policy.log_prob(sample)
    return -log_likelihood[real].mean(), entropy[real].mean()


def _logit_distribution(
    kind: ActionKind, logits: torch.Tensor, nvec: list[int] | None
) -> ActionDistribution:
    if kind == "multibinary":
        return Bernoulli(gym.spaces.MultiBinary(logits.shape[-1]))
    if nvec is None:
        raise ValueError("the likelihood of MultiDiscrete actions needs their nvec")
    return MultiCategorical(gym.spaces.MultiDiscrete(nvec))


class ODTLearner(DTLearner):
    """:class:`DTLearner` with ODT's loss and a learned temperature ``alpha``."""

    def __init__(
        self,
        model: DecisionTransformer,
        cfg: DTConfig,
        odt: ODTConfig,
        device: torch.device,
        nonfinite: str = "stop",
    ) -> None:
        super().__init__(model, cfg, device, nonfinite=nonfinite)
        self.target_entropy = (
            odt.target_entropy if odt.target_entropy is not None else default_target_entropy(model)
        )
        self.log_alpha = torch.tensor(
            math.log(odt.init_temperature), device=device, requires_grad=True
        )
        self.alpha_optimizer = torch.optim.Adam(
            [self.log_alpha], lr=odt.temperature_learning_rate, betas=(0.9, 0.999)
        )

    @property
    def alpha(self) -> float:
        return float(self.log_alpha.detach().exp())

    def segment_loss(self, out: DTOutput, batch: WindowBatch) -> dict[str, torch.Tensor]:
        model = self.model
        nll, entropy = nll_and_entropy(
            out, batch.actions, batch.mask, model.action_kind, model.action_nvec
        )
        alpha = self.log_alpha.detach().exp()
        return {"loss/action": nll - alpha * entropy, "loss/nll": nll, "policy/entropy": entropy}

    def temperature_loss(self, entropy: torch.Tensor) -> torch.Tensor:
        """``alpha * (H - H_target)`` with the entropy held fixed: its gradient moves only
        ``log_alpha``, down while the entropy is above target and up while it is below."""
        return self.log_alpha.exp() * (entropy.detach() - self.target_entropy)

    def after_step(self, terms: dict[str, torch.Tensor]) -> dict[str, float]:
        loss = self.temperature_loss(terms["policy/entropy"])
        self.alpha_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.alpha_optimizer.step()
        return {
            "policy/alpha": self.alpha,
            "policy/target_entropy": self.target_entropy,
            "loss/temperature": float(loss.detach()),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])


class ShardedODTLearner(ShardedDTLearner, ODTLearner):
    """An :class:`ODTLearner` whose every step is computed in ``accumulate`` chunks of windows
    and summed over the members of ``reducer``: :class:`ShardedDTLearner`'s update with ODT's
    loss terms and temperature step.

    Continuous actions draw one entropy sample per step, which other shares draw from other
    generators: the step then equals one learner's in expectation, not to float rounding.
    """
