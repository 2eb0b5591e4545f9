"""PPO on sequences: the clipped-surrogate loss and a learner that updates from fragments.

Memory stays aligned with the data because minibatches are whole env-slot sequences: each row is
re-run from the memory the rollout had at the fragment start, with the rollout's episode-start
flags, so in the first epoch the new log-probs equal the stored ones (ratio = 1).

A batch sampled by older weights than the learner's (``rollout.async_sampling``) is trained with
the decoupled objective of Hilton et al. (2021, "Batch size-invariance for policy
optimization"): the ratio is clipped around the *proximal* policy, the weights this update starts
from, and each step's term is weighted by ``pi_prox / pi_behaviour``. Clipping around the
behaviour policy instead would hold the update near weights already left behind. The proximal
log-probs cost one forward pass over the batch without gradient; the first minibatch's ratio is
then 1 again.

With ``ppo.memory_gradient_steps = B > 0`` each row starts ``B`` steps earlier, from the memory
the rollout had there (the fragment's :class:`~rlformer.rollout.fragment.Prefix`): those steps are
recomputed with gradient and only the fragment's steps enter the loss, so the loss reaches the
memory it reads, up to ``B`` steps back. The recomputed memory comes from the current weights,
not the rollout's, so the first-epoch ratio is no longer exactly 1; that drift is the price.

Two more levers for memory tasks stuck at chance: ``ppo.reconstruction_coef`` adds the loss of
decoding each step's observation from the actor's latent (the model's decoder,
:mod:`rlformer.networks.reconstruction`; it reads no log-prob, so the ratio stays 1), and
``ppo.ent_coef_final`` anneals the entropy weight on the learning rate's schedule.

``model.value_scaling`` (:mod:`rlformer.networks.value_scaling`) decides the value head's units
and the advantages' scale: before the loss, each update folds its returns into the statistics
(PopArt rescales the value head so its decoded outputs stay), the value targets and the
rollout's values go into the head's units, and with percentile scaling the advantages are
divided by the return percentiles' range instead of standardised per minibatch. The policy is
untouched, so the first-epoch ratio is still 1.

Each minibatch is one gradient step. With ``learner.accumulate = K > 1`` its rows are processed
in K chunks whose gradients add up before that step; with ``learner.num_learners = N > 1`` N
replicas each take a share of its rows and all-reduce their gradients (the subclass in
:mod:`rlformer.algos.ppo.shards`, driven by :mod:`rlformer.algos.ppo.data_parallel`). Both
average every term over the whole minibatch, advantage statistics included, so the step is the
one-chunk step up to float rounding.

Calling loop::

    learner = PPOLearner(model, cfg.ppo, device, iterations)
    metrics = learner.update(fragment)      # dict of floats, ready to log
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from rlformer.algos.ppo.config import PPOConfig
from rlformer.algos.ppo.epochs import run_epochs
from rlformer.algos.ppo.valid_steps import masked_mean, masked_moments, neutral_targets
from rlformer.learners.nonfinite import (
    NonFiniteError,
    nonfinite_gradient,
    nonfinite_loss,
    nonfinite_parameter,
)
from rlformer.learners.returns import compute_gae
from rlformer.moved_paths import moved_name
from rlformer.networks.actor_critic import ActorCritic, AgentState, EvaluateOutput
from rlformer.networks.spaces import Tree, tree_map, tree_stack
from rlformer.rollout.fragment import Fragment


class SequenceBatch(NamedTuple):
    """A fragment turned env-major ``[E, F, ...]`` on the learner device, with GAE targets.

    ``obs`` is a tensor or a leaf dict of tensors (Dict / Tuple spaces); ``rewards`` are the
    stored rewards, which the model needs as previous-reward inputs. The model's inputs (``obs``,
    ``actions``, ``episode_start``, ``rewards``, ``state``) start ``prefix_steps`` before the
    targets (``old_log_probs`` ... ``returns``), which cover the fragment only.
    """

    obs: Tree
    actions: torch.Tensor
    old_log_probs: torch.Tensor
    old_values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    episode_start: torch.Tensor
    rewards: torch.Tensor
    state: AgentState
    prefix_steps: int = 0
    # pi_prox / pi_behaviour per step for a batch from older weights (decoupled PPO), else None
    behaviour_weights: torch.Tensor | None = None
    # [E, P + F, n] the masks the rollout acted under (all True over the prefix), else None
    action_masks: torch.Tensor | None = None
    # [E, F] which steps are data (multi-agent rows are not while their agent is absent); the
    # loss, its metrics and the advantage statistics read only those. None: every step.
    valid: torch.Tensor | None = None

    def rows(self, index: torch.Tensor) -> SequenceBatch:
        """The sequences of a subset of env slots."""
        tensors = [tree_map(lambda t: t[index], t) for t in self[:-5]]

        def optional(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t[index]

        return SequenceBatch(
            *tensors,
            state=self.state.index(index),
            prefix_steps=self.prefix_steps,
            behaviour_weights=optional(self.behaviour_weights),
            action_masks=optional(self.action_masks),
            valid=optional(self.valid),
        )


def make_sequence_batch(
    fragment: Fragment,
    cfg: PPOConfig,
    device: torch.device,
    return_rewards: np.ndarray | None = None,
) -> SequenceBatch:
    """GAE on the time-major fragment, then transpose to env-major tensors.

    ``return_rewards`` are the rewards GAE discounts (default: the fragment's, as the model saw
    them); the model's previous-reward inputs stay the fragment's either way.
    """
    advantages, returns = compute_gae(
        fragment.rewards if return_rewards is None else return_rewards,
        fragment.values,
        fragment.terminated,
        fragment.truncated,
        fragment.truncation_values,
        fragment.last_value,
        cfg.gamma,
        cfg.gae_lambda,
    )

    def env_major(array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.swapaxes(array, 0, 1).copy(), device=device)

    prefix = fragment.prefix
    if prefix is None:
        inputs = (fragment.obs, fragment.actions, fragment.episode_start, fragment.rewards)
        state, prefix_steps = fragment.state, 0
    else:

        def joined(before: np.ndarray, after: np.ndarray) -> np.ndarray:
            return np.concatenate([before, after], axis=0)

        obs = tree_stack([prefix.obs, fragment.obs], lambda parts: joined(*parts))
        inputs = (
            obs,
            joined(prefix.actions, fragment.actions),
            joined(prefix.episode_start, fragment.episode_start),
            joined(prefix.rewards, fragment.rewards),
        )
        state, prefix_steps = prefix.state, int(prefix.rewards.shape[0])
    obs, actions, episode_start, rewards = inputs
    masks = fragment.action_masks
    if masks is not None and prefix_steps:  # the prefix only rebuilds memory: nothing masked
        masks = np.concatenate([np.ones((prefix_steps, *masks.shape[1:]), bool), masks])
    return SequenceBatch(
        obs=tree_map(env_major, obs),  # images stay uint8 until the encoder
        actions=env_major(actions),
        old_log_probs=env_major(fragment.log_probs),
        old_values=env_major(fragment.values),
        advantages=env_major(advantages),
        returns=env_major(returns),
        episode_start=env_major(episode_start),
        rewards=env_major(rewards),
        state=state.to(device),
        prefix_steps=prefix_steps,
        action_masks=None if masks is None else env_major(masks),
        valid=None if fragment.valid is None else env_major(fragment.valid),
    )


Average = Callable[[torch.Tensor], torch.Tensor]
"""How :func:`ppo_loss` averages a per-step term: its mean, or its share of a larger batch's."""


def ppo_loss(
    out: EvaluateOutput,
    batch: SequenceBatch,
    cfg: PPOConfig,
    ent_coef: float | None = None,
    average: Average = torch.mean,
    advantage_scale: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped surrogate + (clipped) value loss - entropy bonus (+ observation reconstruction),
    averaged over all steps.

    ``ent_coef``: the entropy weight of this update (``ppo.ent_coef_final`` anneals it); default
    ``cfg.ent_coef``. For a share of a minibatch (:mod:`rlformer.algos.ppo.shards`),
    ``average`` sums a term and divides by the whole minibatch's step count, and
    ``advantage_scale`` is the whole minibatch's advantage (mean, std), so the shares' losses
    and metrics add up to the minibatch's.
    """
    ent_coef = cfg.ent_coef if ent_coef is None else ent_coef
    if batch.valid is not None:
        batch, average, advantage_scale = _over_valid_steps(
            out, batch, cfg, average, advantage_scale
        )
    advantages = batch.advantages
    if advantage_scale is not None:
        mean, std = advantage_scale
        advantages = (advantages - mean) / (std + 1e-8)
    elif cfg.norm_adv and advantages.numel() > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    log_ratio = out.log_prob - batch.old_log_probs
    ratio = log_ratio.exp()
    clipped_terms = torch.max(
        -advantages * ratio, -advantages * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)
    )
    if batch.behaviour_weights is not None:  # decoupled PPO: old_log_probs are pi_prox's
        clipped_terms = batch.behaviour_weights * clipped_terms
    policy_loss = average(clipped_terms)
    value_error = (out.value - batch.returns).pow(2)
    if cfg.clip_value:
        clipped = batch.old_values + (out.value - batch.old_values).clamp(
            -cfg.clip_coef, cfg.clip_coef
        )
        value_error = torch.max(value_error, (clipped - batch.returns).pow(2))
    value_loss = 0.5 * average(value_error)
    entropy = average(out.entropy)
    loss = policy_loss + cfg.vf_coef * value_loss - ent_coef * entropy
    reconstruction = None
    if out.reconstruction_error is not None:
        reconstruction = average(out.reconstruction_error)
        loss = loss + cfg.reconstruction_coef * reconstruction
    elif cfg.reconstruction_coef > 0:
        raise ValueError("ppo.reconstruction_coef > 0 needs a model built with reconstruction")
    with torch.no_grad():
        # Schulman's low-variance KL estimator: E[(r - 1) - log r].
        approx_kl = average((ratio - 1) - log_ratio)
        clip_fraction = average(((ratio - 1).abs() > cfg.clip_coef).float())
        ratio_error = (ratio - 1).abs()
        if batch.valid is not None:
            ratio_error = ratio_error * batch.valid
        max_ratio_error = ratio_error.max()
    metrics = {
        "loss/policy": policy_loss.detach(),
        "loss/value": value_loss.detach(),
        "loss/entropy": entropy.detach(),
        "ppo/approx_kl": approx_kl,
        "ppo/clip_fraction": clip_fraction,
        "ppo/max_ratio_error": max_ratio_error,
    }
    if reconstruction is not None:
        metrics["loss/reconstruction"] = reconstruction.detach()
    return loss, metrics


def _over_valid_steps(
    out: EvaluateOutput,
    batch: SequenceBatch,
    cfg: PPOConfig,
    average: Average,
    advantage_scale: tuple[torch.Tensor, torch.Tensor] | None,
) -> tuple[SequenceBatch, Average, tuple[torch.Tensor, torch.Tensor] | None]:
    """The batch, average and advantage moments of a loss over the valid steps only
    (:mod:`rlformer.algos.ppo.valid_steps`)."""
    assert batch.valid is not None
    if advantage_scale is not None or average is not torch.mean:
        raise ValueError("steps marked invalid are averaged by one learner in one chunk")
    targets = neutral_targets(
        out, batch.valid, batch.old_log_probs, batch.advantages, batch.returns, batch.old_values
    )
    batch = batch._replace(**targets)
    scale = masked_moments(batch.advantages, batch.valid) if cfg.norm_adv else None
    return batch, masked_mean(batch.valid), scale


class PPOLearner:
    """Owns the optimiser; ``update(fragment) -> metrics``.

    A non-finite loss or gradient raises :class:`NonFiniteError` naming the term or parameter
    and the iteration, before the optimiser touches the weights; with ``nonfinite="skip"`` that
    minibatch is skipped instead and counted in ``nonfinite/skipped_minibatches``.

    :class:`~rlformer.algos.ppo.shards.ShardedPPOLearner` computes each step in chunks and
    replicas (``learner.accumulate``, ``learner.num_learners``); the steps it gives are these.
    """

    def __init__(
        self,
        model: ActorCritic,
        cfg: PPOConfig,
        device: torch.device,
        total_iterations: int,
        seed: int = 0,
        nonfinite: str = "stop",
    ) -> None:
        self.model = model.to(device)
        scaling = model.value_scaling
        if scaling is not None and scaling.percentile:
            # Advantages divided by the return percentiles' range take the place of the
            # per-minibatch standardisation, which would undo that scale.
            cfg = cfg.model_copy(update={"norm_adv": False})
        self.cfg = cfg
        self.device = device
        self.total_iterations = max(total_iterations, 1)
        self.iteration = 0
        self.optimizer = torch.optim.Adam(
            model.parameters(), lr=cfg.learning_rate, eps=1e-5, fused=True
        )
        self.generator = torch.Generator().manual_seed(seed)
        self.nonfinite = nonfinite

    def _set_learning_rate(self) -> float:
        frac = 1.0 - self.iteration / self.total_iterations if self.cfg.anneal_lr else 1.0
        lr = self.cfg.learning_rate * max(frac, 0.0)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def _entropy_coef(self) -> float:
        """``ppo.ent_coef`` annealed linearly towards ``ppo.ent_coef_final`` with the fraction
        of training done, on the learning rate's schedule (constant without a final value)."""
        final = self.cfg.ent_coef_final
        if final is None:
            return self.cfg.ent_coef
        remaining = max(1.0 - self.iteration / self.total_iterations, 0.0)
        return final + (self.cfg.ent_coef - final) * remaining

    def update(self, fragment: Fragment) -> dict[str, float]:
        """Several epochs of minibatch PPO over the fragment's env-slot sequences."""
        batch, lr, ent_coef = self.begin(fragment)

        def step(rows: torch.Tensor, where: str) -> dict[str, Any] | None:
            return self.step(batch, rows, len(rows), where, ent_coef)

        tally = run_epochs(self.generator, batch.rewards.shape[0], self.cfg, self.iteration, step)
        self.finish(fragment)
        return {**tally.summary(lr, ent_coef), **batch_diagnostics(batch)}

    def begin(self, fragment: Fragment) -> tuple[SequenceBatch, float, float]:
        """Set this update's learning rate; it, the entropy weight, and the fragment as
        sequences (clipped around the current weights when older ones sampled it)."""
        lr = self._set_learning_rate()
        ent_coef = self._entropy_coef()
        batch = make_sequence_batch(fragment, self.cfg, self.device, self._return_rewards(fragment))
        batch = self._scale_values(batch)
        self.model.train()
        stale = fragment.policy_version != self.iteration  # sampled by older weights
        if stale and self.cfg.decoupled_clip:
            batch = self._decoupled(batch)
        return batch, lr, ent_coef

    def step(
        self,
        batch: SequenceBatch,
        rows: torch.Tensor,
        total_rows: int,
        where: str,
        ent_coef: float,
    ) -> dict[str, Any] | None:
        """The gradient step of a minibatch of ``total_rows`` rows of ``batch``, of which this
        learner holds ``rows`` (all of them here; a share for one of several replicas); its
        metrics, or None when it was skipped (see :meth:`_minibatch_step`)."""
        return self._minibatch_step(batch.rows(rows.to(self.device)), where, ent_coef)

    def finish(self, fragment: Fragment) -> None:
        """Count the update, check the weights, and merge what the workers saw into the
        normalisers."""
        self.iteration += 1
        bad_parameter = nonfinite_parameter(self.model)
        if bad_parameter is not None:
            raise NonFiniteError(f"{bad_parameter} after PPO update {self.iteration}")
        # The workers normalised with the statistics of this version; what they saw joins the
        # statistics only now, after the update (so the ratio above stays exactly 1).
        self.model.merge_statistics(fragment.statistics)

    def _minibatch_step(
        self, mb: SequenceBatch, where: str, ent_coef: float | None = None
    ) -> dict[str, Any] | None:
        """One gradient step on minibatch ``mb`` (entropy weight ``ent_coef``, default
        ``ppo.ent_coef``): its loss metrics and gradient norm, or None
        when a non-finite loss or gradient was skipped (``run.nonfinite: skip``; otherwise that
        raises :class:`NonFiniteError` naming ``where``, before the weights change)."""
        out = self.model.evaluate(
            mb.obs, mb.actions, mb.state, mb.episode_start, mb.rewards, mb.action_masks
        )
        if mb.prefix_steps:  # the prefix only rebuilds memory; the loss is the fragment's
            out = out.from_step(mb.prefix_steps)
        loss, metrics = ppo_loss(out, mb, self.cfg, ent_coef)
        self.optimizer.zero_grad(set_to_none=True)
        return self.apply_gradients(loss, metrics, where, loss.backward)

    def apply_gradients(
        self,
        loss: torch.Tensor,
        metrics: dict[str, Any],
        where: str,
        fill_gradients: Callable[[], None],
    ) -> dict[str, Any] | None:
        """Check ``loss``, let ``fill_gradients`` put the minibatch's gradients in place (this
        learner's backward pass, or the all-reduce of a sharded one), clip and check them, and
        step: the metrics with the gradient norm, or None for a skipped minibatch."""
        problem = nonfinite_loss(loss, metrics)
        if problem is None:
            fill_gradients()
            grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)
            problem = nonfinite_gradient(self.model, grad_norm)
        if problem is not None:
            if self.nonfinite != "skip":
                raise NonFiniteError(
                    f"{problem} in {where}; the weights were not updated "
                    "(set run.nonfinite=skip to skip such minibatches instead)"
                )
            self.optimizer.zero_grad(set_to_none=True)
            return None
        self.optimizer.step()
        return {**metrics, "grad_norm": grad_norm}

    def _decoupled(self, batch: SequenceBatch) -> SequenceBatch:
        """``batch`` with the current weights' log-probs as the clipping centre and
        ``pi_prox / pi_behaviour`` as each step's weight (see the module docstring)."""
        self.model.eval()  # the policy itself, without dropout's noise
        with torch.no_grad():
            out = self.model.evaluate(
                batch.obs,
                batch.actions,
                batch.state,
                batch.episode_start,
                batch.rewards,
                batch.action_masks,
            )
        self.model.train()
        proximal = out.log_prob[:, batch.prefix_steps :]
        return batch._replace(
            old_log_probs=proximal, behaviour_weights=(proximal - batch.old_log_probs).exp()
        )

    def _scale_values(self, batch: SequenceBatch) -> SequenceBatch:
        """``batch`` with ``model.value_scaling`` applied (unchanged without one): the
        statistics updated with its returns (PopArt rescaling the value head so its decoded
        outputs stay), value targets and rollout values in the head's units, advantages divided
        by the percentile range.

        Only the value head changes here, so the policy's first-epoch ratio stays 1.
        """
        scaling = self.model.value_scaling
        if scaling is None:
            return batch
        returns = batch.returns if batch.valid is None else batch.returns[batch.valid]
        if returns.numel():
            scaling.update(returns, self.model.value_head)
        return batch._replace(
            advantages=batch.advantages / scaling.advantage_scale(),
            returns=scaling.encode(batch.returns),
            old_values=scaling.encode(batch.old_values),
        )

    def _return_rewards(self, fragment: Fragment) -> np.ndarray | None:
        """With reward normalisation, the env's rewards scaled by statistics that already count
        this fragment's returns, as SB3's VecNormalize scales each step after updating.

        The workers scaled with the statistics of the weights they were given: for the first
        fragment that is none at all, so its returns would be raw (Pendulum-NoVel: -39.9 +- 17.2
        where the next fragments' are -0.3 +- 0.2) and the first update would fit the value head
        to them (value loss about 950, then below 0.3). None without normalisation.
        """
        if self.model.reward_norm is None:
            return None
        return self.model.scale_rewards(fragment.env_rewards, fragment.statistics.get("reward"))

    def state_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer.state_dict(),
            "iteration": self.iteration,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.iteration = state["iteration"]
        self.generator.set_state(state["generator"])


def batch_diagnostics(batch: SequenceBatch) -> dict[str, float]:
    """How well the rollout's values predicted the returns and, for a batch sampled by older
    weights, how far the weights moved since (0: not at all)."""
    result = {}
    if batch.behaviour_weights is not None:
        result["ppo/behaviour_ratio_error_mean"] = float((batch.behaviour_weights - 1).abs().mean())
    returns, values = batch.returns.flatten(), batch.old_values.flatten()
    if batch.valid is not None:
        returns, values = returns[batch.valid.flatten()], values[batch.valid.flatten()]
    variance = returns.var() if returns.numel() > 1 else returns.new_zeros(())
    result["value/explained_variance"] = (
        float(1 - (returns - values).var() / variance) if variance > 0 else 0.0
    )
    return result


def __getattr__(name: str) -> object:
    """Names that moved to :mod:`rlformer.algos.ppo.epochs`, with a DeprecationWarning."""
    return moved_name(__name__, name)
