"""Decision Transformer learner: AdamW with linear warm-up and gradient clipping.

``update(windows)`` takes one window batch (plain DT) or a list of consecutive windows of the
same episodes (memory DT): the core's memory is carried from each window into the next
(detached, as Transformer-XL does), and the loss averages over all windows' real steps.

With ``learner.accumulate = K > 1`` or ``learner.num_learners = N > 1`` the windows are split
into chunks and replicas whose losses are normalised over the whole batch's real steps (the
subclass in :mod:`rlformer.algos.dt.shards`): the step is this one up to float rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from rlformer.algos.dt.config import DTConfig
from rlformer.data.sampling import WindowBatch
from rlformer.learners.nonfinite import (
    NonFiniteError,
    nonfinite_gradient,
    nonfinite_loss,
    nonfinite_parameter,
)
from rlformer.networks.decision_transformer import DecisionTransformer, DTOutput, dt_loss


class DTLearner:
    """Owns optimiser and schedule; ``update(windows) -> metrics``.

    A non-finite loss or gradient raises :class:`NonFiniteError` before the weights change;
    with ``nonfinite="skip"`` the step is skipped (counted in ``nonfinite/skipped_steps``).
    """

    def __init__(
        self,
        model: DecisionTransformer,
        cfg: DTConfig,
        device: torch.device,
        nonfinite: str = "stop",
    ) -> None:
        self.model = model.to(device)
        self.cfg = cfg
        self.device = device
        self.step = 0
        self.nonfinite = nonfinite
        self.skipped = 0
        # fused: one kernel for all parameters (5x faster than the per-tensor loop on CPU).
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay, fused=True
        )
        warmup = max(cfg.warmup_steps, 1)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: min(1.0, (step + 1) / warmup)
        )

    def update(self, windows: WindowBatch | list[WindowBatch]) -> dict[str, float]:
        """One gradient step on a window batch (or consecutive windows carrying memory)."""
        segments = [windows] if isinstance(windows, WindowBatch) else windows
        self.model.train()
        memory = None
        losses = []
        for raw in segments:
            batch = raw.to(self.device)
            if not batch.mask.any():
                continue
            out = self.forward(batch, memory)
            memory = out.memory
            losses.append((self.segment_loss(out, batch), batch.mask.sum()))
        total = sum(w for _, w in losses)
        terms = {name: sum(parts[name] * w for parts, w in losses) / total for name in losses[0][0]}
        self.optimizer.zero_grad(set_to_none=True)
        detached = {name: value.detach() for name, value in terms.items()}
        return self.apply_gradients(detached, terms["loss/action"].backward)

    def apply_gradients(
        self, terms: dict[str, torch.Tensor], fill_gradients: Callable[[], None]
    ) -> dict[str, Any]:
        """Check the step's loss ``terms`` (detached), let ``fill_gradients`` put the gradients
        in place (this learner's backward pass, or the all-reduce of a sharded one), clip,
        check and step, then advance the schedule: the step's metrics."""
        problem = nonfinite_loss(terms["loss/action"], terms)
        grad_norm = torch.tensor(float("nan"))
        extra: dict[str, float] = {}
        if problem is None:
            fill_gradients()
            grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)
            problem = nonfinite_gradient(self.model, grad_norm)
        if problem is None:
            self.optimizer.step()
            extra = self.after_step(terms)
        elif self.nonfinite == "skip":
            self.optimizer.zero_grad(set_to_none=True)
            self.skipped += 1
        else:
            raise NonFiniteError(
                f"{problem} in DT gradient step {self.step + 1}; the weights were not updated "
                "(set run.nonfinite=skip to skip such steps instead)"
            )
        self.schedule.step()
        self.step += 1
        bad_parameter = nonfinite_parameter(self.model)
        if bad_parameter is not None:
            raise NonFiniteError(f"{bad_parameter} after DT gradient step {self.step}")
        return {
            **{name: float(value) for name, value in terms.items()},
            **extra,
            "grad_norm": float(grad_norm),
            "lr": float(self.schedule.get_last_lr()[0]),
            "nonfinite/skipped_steps": float(self.skipped),
        }

    def forward(self, batch: WindowBatch, memory: Any = None) -> DTOutput:
        """The model on one window batch, from ``memory`` (a memory DT's previous window)."""
        return self.model(
            batch.states,
            batch.actions,
            batch.returns_to_go,
            batch.timesteps,
            batch.mask,
            memory=memory,
        )

    def segment_loss(self, out: DTOutput, batch: WindowBatch) -> dict[str, torch.Tensor]:
        """Loss terms of one window batch; ``loss/action`` is the one minimised.

        Every term is averaged over the real steps, so windows of several segments are weighted
        by their number of real steps.
        """
        model = self.model
        loss = dt_loss(
            out.action_preds, batch.actions, batch.mask, model.action_kind, model.action_nvec
        )
        return {"loss/action": loss}

    def after_step(self, terms: dict[str, torch.Tensor]) -> dict[str, float]:
        """Hook after a successful optimiser step (ODT adapts its temperature here)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "step": self.step,
            "skipped": self.skipped,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        self.step = state["step"]
        self.skipped = state.get("skipped", 0)
