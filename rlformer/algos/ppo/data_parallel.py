"""PPO with data-parallel learner processes (``learner.num_learners > 1``).

The driver keeps what one learner keeps and the run loop reads: the model (replica 0's weights
and normaliser statistics after every update), the minibatch RNG and the iteration. Per update
it puts the fragment in Ray's object store once, every replica turns it into the same sequence
batch, and for each minibatch the driver draws the rows exactly as one learner would
(:func:`~rlformer.algos.ppo.epochs.run_epochs`) and sends each replica its share of whole rows.
The replicas compute the step together (:mod:`rlformer.algos.ppo.shards`): every one ends
with the same weights and Adam state, as under DDP.

A checkpoint is the one-learner checkpoint (replica 0's optimiser state), so a run resumes with
any number of learners. Dropout draws from a generator seeded per (run seed, update, replica),
so a resumed run repeats an uninterrupted one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlformer.algos.ppo.epochs import run_epochs
from rlformer.algos.ppo.learner import PPOLearner, SequenceBatch, batch_diagnostics
from rlformer.algos.ppo.shards import ShardedPPOLearner
from rlformer.config import TrainConfig
from rlformer.learners.learner_group import (
    GroupMember,
    LearnerGroup,
    learner_device,
    learner_placement,
    ray_init_options,
    to_cpu,
)
from rlformer.learners.process_group import GroupReducer
from rlformer.networks.actor_critic import ActorCritic
from rlformer.rollout.fragment import Fragment


class PPOReplica(GroupMember):
    """One learner process: a :class:`PPOLearner` whose minibatch steps sum over the group."""

    def __init__(
        self,
        model: ActorCritic,
        cfg: TrainConfig,
        total_iterations: int,
        rank: int,
        device: str,
        threads: int,
    ) -> None:
        super().__init__(rank, device, threads)
        self.model, self.cfg, self.total_iterations = model, cfg, total_iterations
        self.learner: ShardedPPOLearner | None = None
        self._update: tuple[Fragment, SequenceBatch, float, float] | None = None

    def join(self, host: str, port: int, world_size: int, timeout_s: float) -> None:
        super().join(host, port, world_size, timeout_s)
        cfg = self.cfg
        self.learner = ShardedPPOLearner(
            self.model,
            cfg.ppo,
            self.device,
            self.total_iterations,
            seed=cfg.run.seed,
            nonfinite=cfg.run.nonfinite,
            accumulate=cfg.learner.accumulate,
            reducer=GroupReducer(),
        )

    def load(self, state: dict[str, Any]) -> None:
        """The driver's weights, optimiser state (None: fresh) and iteration."""
        assert self.learner is not None
        self.learner.model.load_state_dict(state["model"])
        if state["optimizer"] is not None:
            self.learner.optimizer.load_state_dict(state["optimizer"])
        self.learner.iteration = state["iteration"]

    def begin(self, fragment: Fragment, iteration: int) -> int:
        """Prepare the update of ``fragment``; the number of env rows it has."""
        assert self.learner is not None
        self.learner.iteration = iteration
        seed = np.random.SeedSequence([self.cfg.run.seed, iteration, self.rank])
        torch.manual_seed(int(seed.generate_state(1)[0]))
        batch, lr, ent_coef = self.learner.begin(fragment)
        self._update = (fragment, batch, lr, ent_coef)
        return int(batch.rewards.shape[0])

    def step(self, rows: list[int], total_rows: int, where: str) -> dict[str, float] | None:
        """This replica's share (``rows``) of one minibatch step; the summed metrics."""
        assert self.learner is not None and self._update is not None
        _, batch, _, ent_coef = self._update
        share = torch.tensor(rows, dtype=torch.long)
        metrics = self.learner.step(batch, share, total_rows, where, ent_coef)
        return None if metrics is None else {key: float(value) for key, value in metrics.items()}

    def finish(self) -> dict[str, Any] | None:
        """End the update; replica 0 answers with what the driver logs and its new weights."""
        assert self.learner is not None and self._update is not None
        fragment, batch, lr, ent_coef = self._update
        self._update = None
        self.learner.finish(fragment)
        if self.rank != 0:
            return None
        return {
            "lr": lr,
            "ent_coef": ent_coef,
            "diagnostics": batch_diagnostics(batch),
            "model": to_cpu(self.learner.model.state_dict()),
        }

    def optimizer_state(self) -> dict[str, Any] | None:
        """Replica 0's Adam state on the CPU (every replica's is the same)."""
        assert self.learner is not None
        return to_cpu(self.learner.optimizer.state_dict()) if self.rank == 0 else None


class ParallelPPOLearner:
    """The driver of ``learner.num_learners`` :class:`PPOReplica` actors, with
    :class:`PPOLearner`'s interface (``update``, ``state_dict``, ``load_state_dict``) plus
    ``start`` and ``close``.

    Raises (from :meth:`start`, :meth:`update`, :meth:`state_dict`):
        LearnerError: A replica died, failed or timed out; every replica is stopped.
    """

    def __init__(
        self, model: ActorCritic, cfg: TrainConfig, device: torch.device, total_iterations: int
    ) -> None:
        self.model = model  # stays on the CPU: it feeds the rollout workers and checkpoints
        self.cfg = cfg
        self.device = learner_device(cfg, device)
        self.total_iterations = max(total_iterations, 1)
        self.iteration = 0
        self.generator = torch.Generator().manual_seed(cfg.run.seed)
        self._optimizer: dict[str, Any] | None = None  # restored, not yet given to replicas
        self.group: LearnerGroup | None = None

    def start(self) -> None:
        """Start the replicas (and Ray, if nothing started it) with the current state."""
        import ray

        learner = self.cfg.learner
        self.group = LearnerGroup(
            PPOReplica,
            (self.model, self.cfg, self.total_iterations),
            size=learner.num_learners,
            **learner_placement(learner, self.device),
            timeout_s=learner.timeout_s,
            device=self.device.type,
            threads=self.cfg.run.torch_threads,
            ray_init=None if ray.is_initialized() else ray_init_options(self.cfg),
        )
        self._push()

    def _push(self) -> None:
        assert self.group is not None
        state = {
            "model": self.model.state_dict(),
            "optimizer": self._optimizer,
            "iteration": self.iteration,
        }
        self.group.call("load", (self.group.put(state),))
        self._optimizer = None

    def update(self, fragment: Fragment) -> dict[str, float]:
        """:meth:`PPOLearner.update`, each minibatch split over the replicas."""
        group = self.group
        assert group is not None, "start() the learners first"
        num_rows = group.call("begin", (group.put(fragment), self.iteration))[0]

        def step(rows: torch.Tensor, where: str) -> dict[str, Any] | None:
            shares = torch.tensor_split(rows, group.size)
            return group.call("step", [(s.tolist(), len(rows), where) for s in shares])[0]

        tally = run_epochs(self.generator, num_rows, self.cfg.ppo, self.iteration, step)
        outcome = group.call("finish")[0]
        self.model.load_state_dict(outcome["model"])
        self.iteration += 1
        return {**tally.summary(outcome["lr"], outcome["ent_coef"]), **outcome["diagnostics"]}

    def state_dict(self) -> dict[str, Any]:
        """The same entries as :meth:`PPOLearner.state_dict`."""
        optimizer = self._optimizer
        if self.group is not None:
            optimizer = self.group.call("optimizer_state")[0]
        return {
            "optimizer": optimizer,
            "iteration": self.iteration,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.iteration = state["iteration"]
        self.generator.set_state(state["generator"])
        self._optimizer = state["optimizer"]
        if self.group is not None:
            self._push()

    def close(self) -> None:
        if self.group is not None:
            self.group.close()
            self.group = None


def make_ppo_learner(
    model: ActorCritic, cfg: TrainConfig, device: torch.device, total_iterations: int
) -> PPOLearner | ParallelPPOLearner:
    """One learner in this process (computing each step in ``learner.accumulate`` chunks), or
    the driver of ``learner.num_learners`` replicas (Ray actors: ``LearnerConfig.on_ray``)."""
    learner = cfg.learner
    if learner.on_ray:
        return ParallelPPOLearner(model, cfg, device, total_iterations)
    args = (model, cfg.ppo, device, total_iterations)
    options = {"seed": cfg.run.seed, "nonfinite": cfg.run.nonfinite}
    if learner.accumulate == 1:
        return PPOLearner(*args, **options)
    return ShardedPPOLearner(*args, accumulate=learner.accumulate, **options)
