"""The ``run`` section: where and how a run is recorded (directory, seed, device, checkpoints)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlformer.config.sections.base import StrictModel


class RunConfig(StrictModel):
    """Where and how a run is recorded."""

    name: str = Field("run", min_length=1, description="Run name; the directory is NAME-TIMESTAMP.")
    root: str = Field("runs", description="Folder that holds run directories.")
    seed: int = Field(0, ge=0, description="Seed for envs, action sampling and initialisation.")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto",
        description="Learner device: auto picks cuda when available. PPO models under 100k "
        "parameters without an image encoder measured faster on the CPU (docs/benchmarks/gpu.md).",
    )
    torch_threads: int = Field(
        1,
        ge=1,
        description="torch intra-op threads for the learner; rollout workers act on one. "
        "A second thread gave PPO at the popgym preset a median 1.09x env steps/s on 2 cores "
        "(docs/benchmarks/throughput.md).",
    )
    checkpoint_every: int = Field(10, ge=1, description="Write a checkpoint every N iterations.")
    keep_checkpoints: int = Field(3, ge=1, description="Checkpoints kept on disk (oldest deleted).")
    progress: bool = Field(True, description="Show a progress bar (plain lines when not a TTY).")
    nonfinite: Literal["stop", "skip"] = Field(
        "stop",
        description="NaN/inf loss or gradient: stop the run, or skip that update (counted).",
    )
