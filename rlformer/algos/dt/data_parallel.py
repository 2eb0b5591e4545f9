"""Decision Transformer training with data-parallel learner processes
(``learner.num_learners > 1``).

The driver samples every batch of windows with the run's sampler RNG, as one learner's run
does, and sends each replica its share of whole windows (a memory DT's consecutive windows of
a row stay together). The replicas compute the step together (:mod:`rlformer.algos.dt.shards`)
and stay identical, as under DDP. The driver's model takes replica 0's weights on
:meth:`ParallelDTLearner.sync` (after each logged iteration), and a checkpoint is the
one-learner checkpoint (replica 0's optimiser and schedule), so a run resumes with any number
of learners. Dropout draws from a generator seeded per (run seed, step, replica).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlformer.algos.dt.learner import DTLearner
from rlformer.algos.dt.shards import ShardedDTLearner, window_rows
from rlformer.config import TrainConfig
from rlformer.data.sampling import WindowBatch
from rlformer.learners.learner_group import (
    GroupMember,
    LearnerGroup,
    learner_device,
    learner_placement,
    ray_init_options,
    to_cpu,
)
from rlformer.learners.process_group import GroupReducer
from rlformer.networks.decision_transformer import DecisionTransformer


class DTReplica(GroupMember):
    """One learner process: a :class:`DTLearner` whose steps sum over the group."""

    def __init__(
        self, model: DecisionTransformer, cfg: TrainConfig, rank: int, device: str, threads: int
    ) -> None:
        super().__init__(rank, device, threads)
        self.model, self.cfg = model, cfg
        self.learner: ShardedDTLearner | None = None

    def join(self, host: str, port: int, world_size: int, timeout_s: float) -> None:
        super().join(host, port, world_size, timeout_s)
        self.learner = self.make_learner(GroupReducer())

    def make_learner(self, reducer: GroupReducer) -> ShardedDTLearner:
        """This replica's learner, summing over ``reducer`` (an ODT replica builds ODT's)."""
        cfg = self.cfg
        return ShardedDTLearner(
            self.model,
            cfg.dt,
            self.device,
            nonfinite=cfg.run.nonfinite,
            accumulate=cfg.learner.accumulate,
            reducer=reducer,
        )

    def load(self, model: dict[str, Any], learner: dict[str, Any] | None) -> None:
        """The driver's weights and learner state (None: fresh)."""
        assert self.learner is not None
        self.learner.model.load_state_dict(model)
        if learner is not None:
            self.learner.load_state_dict(learner)

    def update(self, windows: WindowBatch | list[WindowBatch]) -> dict[str, float]:
        """This replica's share of one gradient step; the summed metrics."""
        assert self.learner is not None
        seed = np.random.SeedSequence([self.cfg.run.seed, self.learner.step, self.rank])
        torch.manual_seed(int(seed.generate_state(1)[0]))
        return self.learner.update(windows)

    def weights(self) -> dict[str, torch.Tensor] | None:
        assert self.learner is not None
        return to_cpu(self.learner.model.state_dict()) if self.rank == 0 else None

    def learner_state(self) -> dict[str, Any] | None:
        assert self.learner is not None
        return to_cpu(self.learner.state_dict()) if self.rank == 0 else None


def _shares(windows: WindowBatch | list[WindowBatch], count: int) -> list[Any]:
    """``windows`` split into ``count`` shares of whole rows (every segment of a row in one)."""
    segments = [windows] if isinstance(windows, WindowBatch) else windows
    rows = torch.tensor_split(torch.arange(segments[0].mask.shape[0]), count)
    shares = [[window_rows(segment, part) for segment in segments] for part in rows]
    return [share[0] for share in shares] if isinstance(windows, WindowBatch) else shares


class ParallelDTLearner:
    """The driver of ``learner.num_learners`` :class:`DTReplica` actors, with
    :class:`DTLearner`'s interface (``update``, ``step``, ``state_dict``, ``load_state_dict``)
    plus ``start``, ``sync`` and ``close``.

    Raises (from :meth:`start`, :meth:`update`, :meth:`sync`, :meth:`state_dict`):
        LearnerError: A replica died, failed or timed out; every replica is stopped.
    """

    replica: type[DTReplica] = DTReplica
    """The actor class of the replicas (ODT's learners subclass it)."""

    def __init__(self, model: DecisionTransformer, cfg: TrainConfig, device: torch.device) -> None:
        self.model = model  # stays on the CPU: evaluation and checkpoints read it
        self.cfg = cfg
        self.device = learner_device(cfg, device)
        self.step = 0
        self._state: dict[str, Any] | None = None  # restored, not yet given to replicas
        self.group: LearnerGroup | None = None

    def start(self) -> None:
        """Start the replicas (and Ray, if nothing started it) with the current state."""
        import ray

        learner = self.cfg.learner
        self.group = LearnerGroup(
            self.replica,
            (self.model, self.cfg),
            size=learner.num_learners,
            **learner_placement(learner, self.device),
            timeout_s=learner.timeout_s,
            device=self.device.type,
            threads=self.cfg.run.torch_threads,
            ray_init=None if ray.is_initialized() else ray_init_options(self.cfg),
        )
        self.group.call("load", (self.group.put(self.model.state_dict()), self._state))
        self._state = None

    def update(self, windows: WindowBatch | list[WindowBatch]) -> dict[str, float]:
        """:meth:`DTLearner.update`, the windows split over the replicas."""
        group = self.group
        assert group is not None, "start() the learners first"
        shares = _shares(windows, group.size)
        metrics = group.call("update", [(share,) for share in shares])[0]
        self.step += 1
        return metrics

    def sync(self) -> None:
        """Give the driver's model replica 0's weights (for evaluation and checkpoints)."""
        if self.group is not None:
            self.model.load_state_dict(self.group.call("weights")[0])

    def state_dict(self) -> dict[str, Any]:
        """The same entries as :meth:`DTLearner.state_dict`."""
        if self.group is None:
            assert self._state is not None, "a learner that never started has no state"
            return self._state
        return self.group.call("learner_state")[0]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step = state["step"]
        self._state = state
        if self.group is not None:
            self.group.call("load", (self.group.put(self.model.state_dict()), state))
            self._state = None

    def close(self) -> None:
        if self.group is not None:
            self.group.close()
            self.group = None


def make_dt_learner(
    model: DecisionTransformer, cfg: TrainConfig, device: torch.device
) -> DTLearner | ParallelDTLearner:
    """One learner in this process (computing each step in ``learner.accumulate`` chunks), or
    the driver of ``learner.num_learners`` replicas (Ray actors: ``LearnerConfig.on_ray``)."""
    learner = cfg.learner
    if learner.on_ray:
        return ParallelDTLearner(model, cfg, device)
    if learner.accumulate == 1:
        return DTLearner(model, cfg.dt, device, nonfinite=cfg.run.nonfinite)
    return ShardedDTLearner(
        model, cfg.dt, device, nonfinite=cfg.run.nonfinite, accumulate=learner.accumulate
    )
