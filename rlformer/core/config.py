"""Configuration of the attention core (embedded in the run config as ``model.core``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

PositionalScheme = Literal["relative", "rotary", "learned", "none"]
BlockType = Literal["gtrxl", "trxl_i", "post_ln"]
GateType = Literal["gru", "input", "output", "highway", "sigmoid_tanh"]


class CoreConfig(BaseModel):
    """Shape and variant of the memory-enabled attention stack."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    n_layers: int = Field(2, ge=1, description="Transformer blocks in the stack.")
    d_model: int = Field(64, ge=1, description="Width of tokens and memory.")
    n_heads: int = Field(4, ge=1, description="Attention heads (must divide d_model).")
    d_ff: int = Field(256, ge=1, description="Hidden width of each block's MLP.")
    dropout: float = Field(
        0.0, ge=0.0, lt=1.0, description="Dropout on attention and sub-layer outputs."
    )
    memory_length: int = Field(
        64,
        ge=1,
        description="M: each token attends to itself and at most M previous tokens per layer.",
    )
    positional: PositionalScheme = Field(
        "relative",
        description="relative (Transformer-XL), rotary, learned (per-head distance bias) or none.",
    )
    block: BlockType = Field(
        "gtrxl", description="gtrxl (gated, identity-map reordered), trxl_i (pre-LN) or post_ln."
    )
    gate: GateType = Field(
        "gru", description="GTrXL gate: gru, input, output, highway, sigmoid_tanh."
    )
    gate_bias: float = Field(
        2.0, description="b_g: larger values start gated blocks nearer the identity."
    )
    episode_clock: bool = Field(
        False,
        description="Add to each token a learned embedding of how many earlier tokens of its "
        "episode it sees (0..M): the step within the episode, capped at M. Relative positions "
        "alone leave the core no sense of time, which a recurrent torso gets for free "
        "(docs/benchmarks/memory.md#popgym-countrecall-and-the-other-hard-tasks).",
    )
    episode_clock_encoding: Literal["learned", "sinusoidal"] = Field(
        "learned",
        description="How the episode clock encodes the step. learned: one free vector per step. "
        "sinusoidal: a learned linear map of a fixed sinusoid of the step, so that one query "
        "projection can aim attention at a step that is a linear function of its own (recall "
        "in reverse order) for every step at once, where free vectors must learn each step "
        "apart.",
    )
    compile: bool = Field(
        False,
        description="Wrap the forward pass in torch.compile. On CUDA, DT training measured "
        "1.28-1.40x faster with it; on CPU 0.83x (docs/benchmarks/gpu.md). The first steps are "
        "slow while the graphs are built.",
    )
    precision: Literal["auto", "fp32", "bf16"] = Field(
        "auto", description="auto: bf16 autocast on CUDA, fp32 on CPU; fp32 / bf16 force one."
    )

    @model_validator(mode="after")
    def _heads_divide_width(self) -> CoreConfig:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.positional == "rotary" and (self.d_model // self.n_heads) % 2:
            raise ValueError("rotary positions need an even head width (d_model / n_heads)")
        return self

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads
