"""Online Decision Transformer training with data-parallel learner processes, or one learner
placed on Ray by ``learner.device`` / ``learner.resources``.

Exactly the DT's replicas (:mod:`rlformer.algos.dt.data_parallel`) with ODT's learner in each:
the driver samples the windows (offline data while pretraining, the replay buffer online),
every replica computes its share, and the temperature ``alpha`` steps on the whole batch's
entropy, the same on every replica. A checkpoint holds replica 0's optimisers, schedule and
``log_alpha``, the one-learner checkpoint, so a run resumes with any number of learners.
"""

from __future__ import annotations

import torch

from rlformer.algos.dt.data_parallel import DTReplica, ParallelDTLearner
from rlformer.algos.odt.learner import ODTLearner, ShardedODTLearner
from rlformer.config import TrainConfig
from rlformer.learners.process_group import GroupReducer
from rlformer.networks.decision_transformer import DecisionTransformer


class ODTReplica(DTReplica):
    """One learner process of an ODT run."""

    def make_learner(self, reducer: GroupReducer) -> ShardedODTLearner:
        cfg = self.cfg
        return ShardedODTLearner(
            self.model,
            cfg.dt,
            cfg.odt,
            self.device,
            nonfinite=cfg.run.nonfinite,
            accumulate=cfg.learner.accumulate,
            reducer=reducer,
        )


class ParallelODTLearner(ParallelDTLearner):
    """The driver of ``learner.num_learners`` :class:`ODTReplica` actors."""

    replica = ODTReplica


def make_odt_learner(
    model: DecisionTransformer, cfg: TrainConfig, device: torch.device
) -> ODTLearner | ParallelODTLearner:
    """One learner in this process (in ``learner.accumulate`` chunks), or the driver of
    replicas on Ray (``LearnerConfig.on_ray``)."""
    learner = cfg.learner
    if learner.on_ray:
        return ParallelODTLearner(model, cfg, device)
    args = (model, cfg.dt, cfg.odt, device)
    if learner.accumulate == 1:
        return ODTLearner(*args, nonfinite=cfg.run.nonfinite)
    return ShardedODTLearner(*args, nonfinite=cfg.run.nonfinite, accumulate=learner.accumulate)
