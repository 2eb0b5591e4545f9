"""Reverse recall without RL: can the memory core learn POPGym Autoencode's lookup at all?

Autoencode shows ``cards`` suits, then asks for them last to first: the token at step t
(``cards - 1 <= t <= 2 * cards - 2``) must name the suit shown at step ``2 * cards - 2 - t``.
This script trains the one-layer core of the ``popgym`` preset (width 64, 4 heads, memory
``2 * cards``) on that lookup with the answers given (cross-entropy) or with only a reward for the
sampled answer (REINFORCE), so that what an encoding of the episode clock allows is measured
apart from PPO's noise. ``--split`` feeds each episode as two segments, the first one's memory
detached, as PPO's update sees episodes that cross a rollout fragment.

    python benchmarks/reverse_recall.py --encoding sinusoidal learned none --steps 800
    python benchmarks/reverse_recall.py --encoding sinusoidal --mode reinforce --steps 2000
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from rlformer.core.config import CoreConfig
from rlformer.core.stack import MemoryCore

SUITS = 4


@dataclass(frozen=True)
class Setup:
    """One trial: the clock's encoding ("none": no clock), the task's size and the training."""

    encoding: str
    cards: int = 52
    width: int = 64
    heads: int = 4
    batch: int = 32
    lr: float = 1e-3
    mode: str = "supervised"  # or "reinforce"
    split: bool = False
    seed: int = 0


def _model(setup: Setup) -> tuple[MemoryCore, nn.Linear, nn.Linear]:
    cfg = CoreConfig(
        n_layers=1,
        d_model=setup.width,
        n_heads=setup.heads,
        d_ff=2 * setup.width,
        memory_length=2 * setup.cards,
        gate_bias=0.0,
        episode_clock=setup.encoding != "none",
        episode_clock_encoding="learned" if setup.encoding == "none" else setup.encoding,
        precision="fp32",
    )
    return MemoryCore(cfg), nn.Linear(SUITS + 1, setup.width), nn.Linear(setup.width, SUITS)


def _episodes(setup: Setup, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs ``[B, 2 * cards - 1, SUITS + 1]`` (suit one-hot, answering flag) and the answers
    ``[B, cards]`` in the order they are asked."""
    cards = setup.cards
    suits = torch.randint(0, SUITS, (setup.batch, cards), generator=generator)
    x = torch.zeros(setup.batch, 2 * cards - 1, SUITS + 1)
    x[:, :cards, :SUITS] = nn.functional.one_hot(suits, SUITS).float()
    x[:, cards - 1 :, SUITS] = 1.0  # Autoencode's mode flag: the last card is shown in play mode
    return x, suits.flip(1)


def train(setup: Setup, steps: int, every: int = 100) -> Iterator[tuple[int, float, float]]:
    """Yields (step, accuracy of the greedy answers on that step's batch, seconds so far)."""
    torch.manual_seed(setup.seed)
    core, embed, head = _model(setup)
    params = [*core.parameters(), *embed.parameters(), *head.parameters()]
    optimizer = torch.optim.Adam(params, lr=setup.lr)
    generator = torch.Generator().manual_seed(setup.seed + 1)
    cards, start = setup.cards, time.perf_counter()
    for step in range(steps):
        x, answers = _episodes(setup, generator)
        if setup.split:  # the first segment's memory carries no gradient, as in PPO's update
            cut = int(torch.randint(cards // 2, cards + cards // 2, (1,), generator=generator))
            with torch.no_grad():
                memory = core(embed(x[:, :cut])).memory
            out = core(embed(x[:, cut:]), memory).output
            first = max(cut, cards - 1)
            logits = head(out[:, first - cut :])
            answers = answers[:, first - (cards - 1) :]
        else:
            logits = head(core(embed(x)).output[:, cards - 1 :])
        if setup.mode == "supervised":
            loss = nn.functional.cross_entropy(logits.reshape(-1, SUITS), answers.reshape(-1))
        else:  # only the sampled answer's reward, +1 right and -1 wrong, as Autoencode's sign
            dist = torch.distributions.Categorical(logits=logits)
            action = dist.sample()
            reward = (action == answers).float() * 2 - 1
            advantage = (reward - reward.mean()) / (reward.std() + 1e-8)
            loss = -(dist.log_prob(action) * advantage).mean() - 0.01 * dist.entropy().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % every == 0 or step == steps - 1:
            accuracy = (logits.argmax(-1) == answers).float().mean().item()
            yield step, accuracy, time.perf_counter() - start


def final_accuracy(setup: Setup, steps: int) -> float:
    """Greedy accuracy on the last training batch."""
    *_, (_, accuracy, _) = train(setup, steps, every=steps)
    return accuracy


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--encoding", nargs="+", default=["sinusoidal", "learned", "none"],
        choices=["sinusoidal", "learned", "none"],
    )  # fmt: skip
    parser.add_argument("--mode", choices=["supervised", "reinforce"], default="supervised")
    parser.add_argument("--split", action="store_true", help="two segments, memory detached")
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--cards", type=int, default=52)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for encoding in args.encoding:
        setup = Setup(
            encoding=encoding,
            cards=args.cards,
            batch=args.batch,
            lr=args.lr,
            mode=args.mode,
            split=args.split,
            seed=args.seed,
        )
        for step, accuracy, seconds in train(setup, args.steps, args.every):
            row = {**setup.__dict__, "step": step, "accuracy": round(accuracy, 3)}
            print(json.dumps({**row, "seconds": round(seconds, 1)}), flush=True)


if __name__ == "__main__":
    main()
