"""The online Decision Transformer's part of the run config: the ``odt`` section, and what an
ODT reads of the others (its network, context, batch and optimiser are ``dt``'s).

The algorithm itself is :mod:`rlformer.algos.odt.algorithm`; this module stays free of torch and of
the algorithm's code, since :mod:`rlformer.config` imports it.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from rlformer.config.sections.base import StrictModel
from rlformer.config.sections.learner import shares_fit


class ODTConfig(StrictModel):
    """Online Decision Transformer settings (``algo: odt``); the network, context, batch and
    optimiser are ``dt``'s. Defaults are those of the ODT paper's gym setup (Zheng et al. 2022)
    except where a description says otherwise."""

    init_from: str | None = Field(
        None,
        description="DT or ODT checkpoint (file or run directory) to fine-tune, read when the "
        "run starts (a resumed run needs only its own checkpoints); null: pretrain on "
        "dt.dataset for odt.pretrain_steps first.",
    )
    pretrain_steps: int = Field(
        5000, ge=0, description="Offline gradient steps before going online (paper: 5000)."
    )
    online_steps: int = Field(
        200_000,
        ge=0,
        description="Env steps collected online (paper: up to 1M; a CPU-sized default here); 0 "
        "stops after pretraining (a DT with ODT's stochastic head and loss, to fine-tune later "
        "by resuming with more online steps).",
    )
    updates_per_iteration: int = Field(
        300, ge=1, description="Gradient steps on the replay buffer after each collection."
    )
    replay_size: int = Field(
        1000,
        ge=1,
        description=(
            "Trajectories in the FIFO replay buffer (seeded with the best offline ones); a "
            "resumed run may change it only while the buffer holds no online trajectories yet."
        ),
    )
    exploration_return: float | None = Field(
        None,
        description="Target return the rollouts are conditioned on; null: twice the largest "
        "dt.target_returns (the paper's ratio, e.g. 7200 vs 3600 on Hopper).",
    )
    init_temperature: float = Field(0.1, gt=0, description="Initial entropy weight alpha.")
    temperature_learning_rate: float = Field(
        1e-4, gt=0, description="Adam learning rate of log(alpha)."
    )
    target_entropy: float | None = Field(
        None,
        description="Entropy alpha steers toward; null: -action dimension (continuous, paper) "
        "or 0.3*ln(n) for n discrete actions (rlformer's choice).",
    )


def check_config(cfg: Any) -> None:
    if not cfg.dt.condition_on_return:
        # Its rollouts aim at odt.exploration_return and its updates relabel returns-to-go with
        # what was achieved: without the return input, neither reaches the policy.
        raise ValueError(
            "dt.condition_on_return: false is behaviour cloning, but an online DT conditions on "
            "returns (exploration target, hindsight relabelling); use algo dt for the baseline"
        )
    batch = cfg.dt.batch_size
    shares_fit(cfg, batch, "windows per batch", f"dt.batch_size={batch}")
