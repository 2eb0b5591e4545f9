"""The ``rollout`` section: how experience is collected (in-process vector envs or Ray actors)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from rlformer.config.sections.base import StrictModel


class RolloutConfig(StrictModel):
    """How experience is collected: in-process vector envs or Ray actors."""

    backend: Literal["local", "ray"] = Field(
        "local", description="local: vector envs in this process; ray: one Ray actor per worker."
    )
    num_workers: int = Field(
        1, ge=1, description="Rollout workers (Ray actors, or in-process groups)."
    )
    envs_per_worker: int = Field(
        8, ge=1, description="Environments stepped together by each worker."
    )
    fragment_length: int = Field(
        128, ge=1, description="Steps per env slot in one fragment; also the PPO training sequence."
    )
    ray_address: str | None = Field(
        None,
        description="null starts an embedded local Ray; 'auto' or 'host:port' joins a cluster.",
    )
    worker_cpus: float = Field(
        0.5,
        gt=0,
        description="CPUs reserved per Ray actor (fractional so small machines never stall).",
    )
    max_worker_restarts: int = Field(
        3,
        ge=0,
        description="Dead Ray workers replaced per run before training stops with an error.",
    )
    sample_timeout_s: float = Field(
        300.0,
        gt=0,
        description="Seconds to wait for one fragment before treating its worker as dead.",
    )
    ray_runtime_env: dict[str, Any] | None = Field(
        None,
        description="Ray runtime_env for the workers, e.g. {py_modules: [./mypkg]} on a cluster.",
    )
    async_sampling: bool = Field(
        False,
        description="Ray backend, PPO and multi-agent PPO: workers sample the next fragment with "
        "the previous weights while the learner updates (one policy version of lag; faster where "
        "sampling and updating each take a core).",
    )

    compile_act: bool = Field(
        False,
        description="Run the workers' policy step (encoder, core, heads; sampling stays eager) "
        "through torch.compile. Building the graphs takes tens of seconds at the start of a "
        "run, in each worker; see docs/benchmarks/throughput.md for what it saves.",
    )

    @model_validator(mode="after")
    def _async_needs_ray(self) -> RolloutConfig:
        if self.async_sampling and self.backend != "ray":
            raise ValueError(
                "async_sampling needs backend=ray (--set rollout.backend=ray): the workers must "
                "run in their own processes to sample while the learner updates"
            )
        return self
