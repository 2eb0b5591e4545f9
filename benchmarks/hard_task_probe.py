"""Why an agent stays at chance on a POPGym task: its learning curve, its value function, whether
it uses what it should remember, and (GTrXL) whether it attends to the steps that hold it.

Four measurements per run directory (or checkpoint), all with the real env and the trained
model:

1. **Training curve** (``metrics.jsonl``): the mean return of the last 100 training episodes
   (sampled actions) averaged over the first, the best and the last 5% of training, POPGym's
   MMER (the highest single point, which includes the noise of one 100-episode mean), and the
   policy entropy at the start and the end against a uniform policy's.
2. **Value function**, over ``--episodes`` episodes with sampled actions (the policy the critic
   was trained on): its prediction at each step against the discounted return-to-go with the
   run's gamma, bootstrapped like the PPO targets (a time-limited episode adds
   ``gamma^k V(final observation)``). A value that has learned only the episode clock has its
   variance explained by the step number and no correlation with the return-to-go within a
   step; the best step-only predictor (the mean return-to-go at each step, fitted on the same
   episodes) is the reference for its explained variance.
3. **Behaviour**, greedy and sampled, from the env's true state. BattleshipEasy (8x8, 12 ship
   squares, 64 shots): the share of shots at squares already fired at (only memory beyond the
   last step avoids them; a uniformly random shooter repeats ``1 - (63/64)^t`` of its shots at
   step t), the hit rate, and after a hit whether the next shot is beside it (the last shot and
   its result are in the observation, so this needs no memory). ConcentrationEasy (52 cards,
   colours, 104 flips): the share of wasted flips (a card already face up, visible in the
   current observation), and, when the pair's first card is up and a face-down card of its
   colour was revealed earlier in the episode, how often the second flip takes such a card;
   as a control, how often it takes a revealed card of the other colour (a policy that keeps
   returning to favourite cards takes revealed cards of both colours more often than chance).
   AutoencodeEasy (52 cards shown, then asked for in reverse order): the share of answers
   right, overall and by how far back the card lies (see ``AutoencodeProbe``).
   Each rate sits beside what a uniformly random action would score in the same states.
4. **Attention** (GTrXL runs, sampled play): the share of the first layer's attention (heads
   averaged) that the step puts on earlier steps that carry what it needs, against the share
   uniform attention over the visible steps would give. Battleship: the steps whose
   observation reported a hit. Concentration: on second flips with a known match, the steps
   whose observation showed such a card. Autoencode: on each answer, the step that showed
   the card asked for. The weights are those the core's fused attention
   uses, recomputed from the queries, keys and mask it is called with, and checked against its
   output.

    .venv/bin/python benchmarks/hard_task_probe.py RUN_DIR [RUN_DIR ...] --episodes 100
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

import rlformer.core.attention as attention_module
from rlformer.config import TrainConfig
from rlformer.networks.actor_critic import ActorCritic, AgentState
from rlformer.networks.encoders import to_torch
from rlformer.networks.spaces import flatten_obs
from rlformer.policies.registry import policy_from_payload
from rlformer.rollout.env_factory import env_from_config
from rlformer.runs.checkpoints import checkpoint_config, load_checkpoint
from rlformer.runs.directory import read_metrics

MODES = ("greedy", "sampled")


# ----------------------------------------------------------------------------- loading
@dataclass
class Run:
    """A trained actor-critic with what the probe needs from its config."""

    spec: str
    model: ActorCritic
    cfg: TrainConfig
    run_dir: Path

    @property
    def agent(self) -> str:
        torso = self.cfg.model.torso
        if torso != "gtrxl":
            return torso.upper()
        return "GTrXL, clock" if self.cfg.model.core.episode_clock else "GTrXL"

    @property
    def seed(self) -> int:
        return int(self.cfg.run.seed)


def load_run(spec: str) -> Run:
    """The newest checkpoint of a run directory (or a checkpoint file) as a PPO model."""
    payload = load_checkpoint(spec)
    if str(payload.get("kind", "ppo")) != "ppo":
        raise SystemExit(f"{spec}: not a PPO checkpoint")
    policy = policy_from_payload(payload, spec)
    path = Path(spec)
    run_dir = path if path.is_dir() else path.parent.parent
    return Run(spec, policy.model, checkpoint_config(payload, spec), run_dir)


# ----------------------------------------------------------------------------- tallies
class Tally:
    """Running means by name: ``add(name, value)``, ``means()``; counts kept for the report."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, name: str, value: float) -> None:
        self.sums[name] += float(value)
        self.counts[name] += 1

    def means(self) -> dict[str, float]:
        out = {name: self.sums[name] / self.counts[name] for name in self.sums}
        out |= {f"n/{name}": float(count) for name, count in self.counts.items()}
        return out


# ----------------------------------------------------------------------------- 1. training curve
def uniform_entropy(space: gym.Space) -> float | None:
    """Entropy of the uniform policy over a discrete action space (None for other spaces)."""
    if isinstance(space, gym.spaces.Discrete):
        return math.log(int(space.n))
    if isinstance(space, gym.spaces.MultiDiscrete):
        return float(np.log(space.nvec).sum())
    return None


def curve_facts(run_dir: Path, entropy_max: float | None, share: float = 0.05) -> dict[str, Any]:
    """Return and entropy at the start, best and end of training, from ``metrics.jsonl``.

    Each point of ``rollout/return_mean`` is already a 100-episode mean; the points are
    averaged over bins of ``share`` of the run's steps so that start, best and end compare
    like with like, and the maximum single point (POPGym's MMER) is given beside them.
    """
    rows = [row for row in read_metrics(run_dir) if "rollout/return_mean" in row]
    if not rows:
        return {}
    steps = np.array([row["step"] for row in rows], dtype=float)
    returns = np.array([row["rollout/return_mean"] for row in rows])
    bins = np.minimum((steps / (steps[-1] * share)).astype(int), int(round(1 / share)) - 1)
    means = [returns[bins == b].mean() for b in np.unique(bins)]
    entropy = np.array([row.get("loss/entropy", np.nan) for row in rows])
    explained = np.array([row.get("value/explained_variance", np.nan) for row in rows])
    last = bins == bins[-1]
    return {
        "steps": int(steps[-1]),
        "return_start": float(means[0]),
        "return_best": float(max(means)),
        "return_end": float(means[-1]),
        "mmer": float(returns.max()),
        "entropy_start": float(entropy[0]),
        "entropy_end": float(np.nanmean(entropy[last])),
        "entropy_uniform": entropy_max,
        "explained_variance_end": float(np.nanmean(explained[last])),
    }


# ----------------------------------------------------------------------------- 4. attention
class _RecordingFunctional:
    """``torch.nn.functional`` for the attention module, whose scaled-dot-product attention also
    keeps its weights: ``softmax(q·kᵀ/√h + mask)``, from the very tensors the fused call gets,
    checked against that call's output before they are kept."""

    def __init__(self, sink: list[torch.Tensor]) -> None:
        self.sink = sink

    def __getattr__(self, name: str) -> Any:
        return getattr(F, name)

    def scaled_dot_product_attention(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        dropout_p: float = 0.0,
        **kwargs: Any,
    ) -> torch.Tensor:
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, **kwargs
        )
        if dropout_p > 0.0 or kwargs.get("is_causal") or kwargs.get("enable_gqa"):
            raise RuntimeError("attention weights are only recomputed for plain eval-mode calls")
        scale = kwargs.get("scale") or 1.0 / math.sqrt(q.shape[-1])
        scores = (q @ k.transpose(-2, -1)) * scale
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                scores = scores.masked_fill(~attn_mask, float("-inf"))
            else:
                scores = scores + attn_mask
        weights = scores.softmax(dim=-1)
        if not torch.allclose(weights @ v, out, atol=1e-5, rtol=1e-4):
            raise RuntimeError("recomputed attention weights do not reproduce the core's output")
        self.sink.append(weights.detach())
        return out


@contextmanager
def recorded_attention() -> Iterator[list[torch.Tensor]]:
    """Within the block, every attention call of the core appends its weights ``[B, H, T, S]``
    (one entry per layer and call) to the yielded list. The core itself is not changed."""
    sink: list[torch.Tensor] = []
    with mock.patch.object(attention_module, "F", _RecordingFunctional(sink)):
        yield sink


def by_distance(weights: list[torch.Tensor], visible: int) -> list[np.ndarray]:
    """Per layer, one step's attention (heads averaged) indexed by distance: ``w[d]`` is the
    weight on the token ``d`` steps back (``d = 0``: itself), for the ``visible`` tokens.

    One token per call: the keys are ``[memory slots ; this token]``, oldest first, so key
    ``S - 1 - d`` is the token ``d`` steps back; every other key is hidden (weight 0).
    """
    rows = []
    for layer in weights:
        w = layer[0, :, -1].mean(dim=0).flip(0).numpy()  # [S], distance-major
        if w[visible:].sum() > 1e-6 or (w[:visible] <= 0).any():
            raise RuntimeError(f"attention does not cover exactly the {visible} visible steps")
        rows.append(w[:visible])
    return rows


def attention_share(
    tally: Tally, name: str, weights: list[np.ndarray], distances: Sequence[int]
) -> None:
    """Tally the mass each layer puts on the tokens at ``distances`` and the uniform share."""
    for layer, w in enumerate(weights):
        inside = [d for d in distances if 0 < d < len(w)]
        tally.add(f"attention/L{layer + 1}/{name}", w[inside].sum())
        tally.add(f"attention/L{layer + 1}/{name}_uniform", len(inside) / len(w))


# ----------------------------------------------------------------------------- 3. task probes
class TaskProbe:
    """Hooks called around every env step with the env's true state; subclasses tally."""

    task = "generic"

    def __init__(self) -> None:
        self.tally = Tally()

    def start(self, game: Any) -> None:
        """A new episode (the env was just reset)."""

    def before(self, game: Any, t: int, action: Any, attention: list[np.ndarray] | None) -> None:
        """Step ``t`` is about to take ``action``; ``attention``: per layer, by distance."""

    def after(self, game: Any, t: int, obs: Any) -> None:
        """Step ``t`` returned ``obs`` (the observation of token ``t + 1``)."""


class BattleshipProbe(TaskProbe):
    """Repeated shots, hits, shots beside the last hit; attention on the steps that reported
    hits. Token ``s`` holds the result of shot ``s - 1`` (and, via PreviousAction, its square)."""

    task = "battleship"

    def start(self, game: Any) -> None:
        self.last_hit: tuple[int, int] | None = None
        self.hit_tokens: list[int] = []
        self.shot = (0, 0)

    def before(self, game: Any, t: int, action: Any, attention: list[np.ndarray] | None) -> None:
        row, col = self.shot = tuple(int(a) for a in np.asarray(action).reshape(-1)[:2])
        squares = game.board.size
        open_ships = (game.board == 1) & (game.guesses == 0)
        repeat = bool(game.guesses[row, col])
        hit = bool(open_ships[row, col])
        self.tally.add("repeat", repeat)
        self.tally.add("repeat_random", 1.0 - (1.0 - 1.0 / squares) ** t)
        self.tally.add("hit", hit)
        self.tally.add("hit_uniform", open_ships.sum() / squares)
        if self.last_hit is not None:
            r, c = self.last_hit
            neighbours = [
                (r + dr, c + dc)
                for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1))
                if 0 <= r + dr < game.board_size and 0 <= c + dc < game.board_size
            ]
            self.tally.add("adjacent_after_hit", (row, col) in neighbours)
            self.tally.add("adjacent_after_hit_uniform", len(neighbours) / squares)
            self.tally.add("hit_after_hit", hit)
            self.tally.add("hit_after_hit_uniform", open_ships.sum() / squares)
        if attention is not None and self.hit_tokens:
            attention_share(self.tally, "hit_steps", attention, [t - s for s in self.hit_tokens])

    def after(self, game: Any, t: int, obs: Any) -> None:
        hit = bool(game.last_obs)  # a new hit: a ship square not fired at before
        self.last_hit = self.shot if hit else None
        if hit:
            self.hit_tokens.append(t + 1)


class ConcentrationProbe(TaskProbe):
    """Wasted flips, and second flips that take a card of the first card's colour revealed
    earlier; attention on the steps that showed such a card."""

    task = "concentration"

    def start(self, game: Any) -> None:
        self.seen_at: dict[int, list[int]] = defaultdict(list)  # position -> tokens showing it
        self._remember(game, 0)

    def _remember(self, game: Any, token: int) -> None:
        """The cards token ``token`` shows face up (``game.obs``: what the agent is given) that
        are not matched: those a memory could use later, once they are face down again."""
        matched = set(game.deck["face_up_idx"])
        for position in np.flatnonzero(np.asarray(game.obs) != game.facedown_card):
            if int(position) not in matched:
                self.seen_at[int(position)].append(token)

    def before(self, game: Any, t: int, action: Any, attention: list[np.ndarray] | None) -> None:
        card = int(np.asarray(action).reshape(-1)[0])
        cards = len(game.state)
        face_up, in_play = list(game.deck["face_up_idx"]), list(game.deck["in_play_idx"])
        self.tally.add("wasted", card in face_up or card in in_play)
        self.tally.add("wasted_uniform", (len(face_up) + len(in_play)) / cards)
        if len(in_play) != 1:
            return
        first = in_play[0]
        colour = game.state[first]
        down = [p for p in range(cards) if p not in face_up and p != first]
        matching = [p for p in down if game.state[p] == colour]
        self.tally.add("second_match", card in matching)
        self.tally.add("second_match_uniform", len(matching) / cards)
        # The control: seen cards of the other colour. A policy that returns to its favourite
        # cards takes seen cards of both colours more often than uniform; memory, matches only.
        mismatched = [p for p in down if game.state[p] != colour and self.seen_at.get(p)]
        if mismatched:
            self.tally.add("known_mismatch_taken", card in mismatched)
            self.tally.add("known_mismatch_taken_uniform", len(mismatched) / cards)
        known = [p for p in matching if self.seen_at.get(p)]
        if not known:
            return
        self.tally.add("known_match_taken", card in known)
        self.tally.add("known_match_taken_uniform", len(known) / cards)
        if attention is not None:
            tokens = {s for p in known for s in self.seen_at[p]}
            attention_share(self.tally, "known_match_steps", attention, [t - s for s in tokens])

    def after(self, game: Any, t: int, obs: Any) -> None:
        self._remember(game, t + 1)


class AutoencodeProbe(TaskProbe):
    """Answers right by how far back their card lies; attention on the step that showed it.

    The cards are dealt one per step and shown at tokens ``0 .. n - 1``; then the ``n`` answers
    come in reverse order, so the answer at token ``t`` asks for the card shown at token
    ``2n - 2 - t``, ``2t - 2n + 2`` steps back. The bands split the answers by what a one-layer
    GTrXL with memory ``M`` can see: the first answers (the episode clock still tells the step
    apart, ``t < M``), the rest whose card is in memory, and those whose card has left it.
    """

    task = "autoencode"

    def __init__(self, memory: int = 64) -> None:
        super().__init__()
        self.memory = memory

    def before(self, game: Any, t: int, action: Any, attention: list[np.ndarray] | None) -> None:
        if game.mode.value != 0:  # watching: the action is ignored
            return
        shown_at = len(game.deck["system"]) - 1  # the token that showed the card asked for
        correct = int(np.asarray(action).reshape(-1)[0]) == int(
            game.deck.suits_idx[game.deck["system"][-1]]
        )
        back = t - shown_at
        if t < self.memory:
            band = "answer_clocked"
        elif back <= self.memory:
            band = "answer_in_memory"
        else:
            band = "answer_beyond_memory"
        for name in ("answer", band):
            self.tally.add(name, correct)
            self.tally.add(f"{name}_uniform", 1.0 / game.action_space.n)
        if attention is not None and 0 < back < len(attention[0]):
            attention_share(self.tally, "shown_step", attention, [back])


def task_probe(game: Any, memory: int = 64) -> TaskProbe:
    """The probe for the env's game (by the state it keeps), or the generic one."""
    if hasattr(game, "board") and hasattr(game, "guesses"):
        return BattleshipProbe()
    if hasattr(game, "deck") and hasattr(game, "mode") and hasattr(game.deck, "suits_idx"):
        return AutoencodeProbe(memory)
    if hasattr(game, "deck") and hasattr(game, "facedown_card"):
        return ConcentrationProbe()
    return TaskProbe()


# ----------------------------------------------------------------------------- playing
@dataclass
class Played:
    """What episodes of one mode gave: per-step value records and the probe's tallies."""

    returns: list[float] = field(default_factory=list)
    # (step within the episode, value, discounted return-to-go, bootstrapped return-to-go)
    values: list[tuple[int, float, float, float]] = field(default_factory=list)


def _batched(obs: Any) -> Any:
    """A Tuple/Dict observation with a batch axis of one on every leaf."""
    if isinstance(obs, dict):
        return {key: _batched(value) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_batched(value) for value in obs)
    return np.asarray(obs)[None]


def _step(
    model: ActorCritic,
    obs: Any,
    state: AgentState,
    start: bool,
    deterministic: bool,
    generator: torch.Generator | None,
) -> tuple[Any, float, AgentState]:
    """One step of the model as a rollout takes it: env action, value, next state."""
    tokens = to_torch(flatten_obs(model.observation_space, _batched(obs)), "cpu")
    out = model.act(
        tokens, state, torch.tensor([start]), deterministic=deterministic, generator=generator
    )
    return model.env_action(out.action)[0], float(out.value[0]), out.state


def discounted_to_go(rewards: Sequence[float], gamma: float, tail: float) -> np.ndarray:
    """``G_t = r_t + gamma G_{t+1}`` with ``G_T = tail``."""
    out = np.zeros(len(rewards))
    running = tail
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def play_episode(
    run: Run,
    env: gym.Env,
    probe: TaskProbe,
    seed: int,
    deterministic: bool,
    generator: torch.Generator,
    played: Played,
) -> None:
    """One episode; the probe sees the true state around every step, values go to ``played``."""
    model, game = run.model, env.unwrapped
    memory = run.cfg.model.core.memory_length if run.cfg.model.torso == "gtrxl" else None
    obs, _ = env.reset(seed=seed)
    probe.start(game)
    state = model.initial_state(1)
    rewards, values = [], []
    done, terminated, t = False, False, 0
    while not done:
        with recorded_attention() as sink:
            action, value, state = _step(model, obs, state, t == 0, deterministic, generator)
        attention = None
        if memory is not None and sink:
            attention = by_distance(sink, min(t, memory) + 1)
            if t > 0:
                attention_share(probe.tally, "earlier_steps", attention, range(1, t + 1))
        probe.before(game, t, action, attention)
        obs, reward, terminated, truncated, _ = env.step(action)
        probe.after(game, t, obs)
        state = state.with_reward(model.scale_rewards(np.array([reward])))
        rewards.append(float(reward))
        values.append(value)
        done, t = terminated or truncated, t + 1
    # A time-limited episode's targets go on with the value of its final observation.
    tail = 0.0 if terminated else _step(model, obs, state, False, True, None)[1]
    gamma = run.cfg.ppo.gamma
    plain = discounted_to_go(rewards, gamma, 0.0)
    boot = discounted_to_go(rewards, gamma, tail)
    played.returns.append(float(sum(rewards)))
    played.values.extend(zip(range(t), values, plain, boot, strict=True))


def play(run: Run, episodes: int, seed: int, deterministic: bool) -> tuple[Played, TaskProbe]:
    """``episodes`` episodes on env seeds ``seed, seed + 1, ...`` (the same boards for every
    run); sampled actions draw from a generator seeded with ``seed``."""
    if run.cfg.env is None:
        raise SystemExit(f"{run.spec}: the checkpoint does not name its training env")
    env = env_from_config(run.cfg.env)
    env.reset(seed=seed)
    probe = task_probe(env.unwrapped, run.cfg.model.core.memory_length)
    generator = torch.Generator().manual_seed(seed)
    played = Played()
    for episode in range(episodes):
        play_episode(run, env, probe, seed + episode, deterministic, generator, played)
    env.close()
    return played, probe


# ----------------------------------------------------------------------------- 2. value function
def _explained(target: np.ndarray, prediction: np.ndarray) -> float:
    return float(1.0 - np.var(target - prediction) / np.var(target))


def _by_step_mean(steps: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Each entry replaced by the mean of ``x`` over the entries with the same step."""
    sums = np.bincount(steps, weights=x)
    counts = np.bincount(steps)
    return (sums / np.maximum(counts, 1))[steps]


def value_facts(records: Sequence[tuple[int, float, float, float]]) -> dict[str, float]:
    """How well the value predicts the (bootstrapped) return-to-go, and whether it knows more
    than the step number: its explained variance beside that of the best step-only
    predictor, the share of its own variance the step explains, and its correlation with the
    return-to-go within a step (both minus their mean at that step)."""
    steps = np.array([r[0] for r in records], dtype=int)
    value, plain, boot = (np.array([r[i] for r in records]) for i in (1, 2, 3))
    value_clock, boot_clock = _by_step_mean(steps, value), _by_step_mean(steps, boot)
    within_v, within_g = value - value_clock, boot - boot_clock
    return {
        "explained_variance": _explained(boot, value),
        "explained_variance_plain": _explained(plain, value),
        "explained_variance_step_only": _explained(boot, boot_clock),
        "value_variance_from_step": float(np.var(value_clock) / max(np.var(value), 1e-12)),
        "within_step_correlation": float(np.corrcoef(within_v, within_g)[0, 1]),
        "correlation_with_step": float(np.corrcoef(value, steps)[0, 1]),
        "value_mean": float(value.mean()),
        "target_mean": float(boot.mean()),
    }


# ----------------------------------------------------------------------------- driver
def probe_run(spec: str, episodes: int, seed: int, modes: Sequence[str]) -> dict[str, Any]:
    """Every measurement for one run, as plain numbers (JSON-ready)."""
    run = load_run(spec)
    result: dict[str, Any] = {
        "run": spec,
        "env": run.cfg.env.id if run.cfg.env is not None else None,
        "agent": run.agent,
        "seed": run.seed,
        "curve": curve_facts(run.run_dir, uniform_entropy(run.model.action_space))
        if (run.run_dir / "metrics.jsonl").exists()
        else {},
    }
    for mode in modes:
        played, probe = play(run, episodes, seed, deterministic=mode == "greedy")
        result[mode] = {
            "task": probe.task,
            "return_mean": float(np.mean(played.returns)),
            "value": value_facts(played.values),
            "behaviour": probe.tally.means(),
        }
    return result


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _pair(numbers: dict[str, float], name: str, digits: int = 3) -> str:
    """``agent's rate (uniform's rate)`` for a tally and its reference."""
    if name not in numbers:
        return "-"
    reference = numbers.get(f"{name}_uniform", numbers.get(f"{name}_random"))
    return f"{_fmt(numbers[name], digits)} ({_fmt(reference, digits)})"


BEHAVIOUR_COLUMNS = {
    "battleship": (
        ("repeated shots (random shooter)", "repeat"),
        ("hit rate (uniform shot)", "hit"),
        ("after a hit: beside it (uniform)", "adjacent_after_hit"),
        ("after a hit: hit (uniform)", "hit_after_hit"),
    ),
    "concentration": (
        ("wasted flips (uniform)", "wasted"),
        ("second flip matches (uniform)", "second_match"),
        ("known match taken (uniform)", "known_match_taken"),
        ("known other colour taken (uniform)", "known_mismatch_taken"),
    ),
    "autoencode": (
        ("answers right (uniform)", "answer"),
        ("clock tells the step (uniform)", "answer_clocked"),
        ("card in memory (uniform)", "answer_in_memory"),
        ("card beyond memory (uniform)", "answer_beyond_memory"),
    ),
}
ATTENTION_COLUMNS = {
    "battleship": (("on hit steps (uniform)", "hit_steps"),),
    "concentration": (("on steps showing a known match (uniform)", "known_match_steps"),),
    "autoencode": (("on the step that showed the card asked for (uniform)", "shown_step"),),
}


def print_tables(results: list[dict[str, Any]], modes: Sequence[str]) -> None:
    """Markdown tables per env: training curve, value function, behaviour, attention."""
    for env_id in dict.fromkeys(r["env"] for r in results):
        rows = sorted(
            (r for r in results if r["env"] == env_id), key=lambda r: (r["agent"], r["seed"])
        )
        print(f"\n### {env_id}\n")
        _curve_table(rows)
        if "sampled" in modes:
            _value_table(rows)
        _behaviour_table(rows, modes)
        if "sampled" in modes:
            _attention_table(rows)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], text_columns: int = 2) -> None:
    """A markdown table; the first ``text_columns`` columns left-aligned, the rest right."""
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * text_columns + " ---: |" * (len(header) - text_columns))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def _curve_table(rows: list[dict[str, Any]]) -> None:
    header = (
        "agent",
        "seed",
        "return: first 5% / best 5% / last 5%",
        "MMER",
        "entropy start / end (uniform)",
        "value EV, last 5%",
    )
    cells = [
        (
            r["agent"],
            str(r["seed"]),
            " / ".join(_fmt(c[k]) for k in ("return_start", "return_best", "return_end")),
            _fmt(c["mmer"]),
            f"{_fmt(c['entropy_start'], 2)} / {_fmt(c['entropy_end'], 2)} "
            f"({_fmt(c['entropy_uniform'], 2)})",
            _fmt(c["explained_variance_end"], 2),
        )
        for r in rows
        if (c := r["curve"])
    ]
    print("Training curve (mean return of the last 100 training episodes, sampled actions):\n")
    _table(header, cells)


VALUE_COLUMNS = (
    ("EV", "explained_variance"),
    ("EV, step-only predictor", "explained_variance_step_only"),
    ("value variance from step", "value_variance_from_step"),
    ("within-step corr. with return-to-go", "within_step_correlation"),
    ("corr. with step", "correlation_with_step"),
)


def _value_table(rows: list[dict[str, Any]]) -> None:
    cells = [
        (r["agent"], str(r["seed"]), *(_fmt(r["sampled"]["value"][k], 2) for _, k in VALUE_COLUMNS))
        for r in rows
    ]
    print("\nValue function against the bootstrapped return-to-go, sampled play:\n")
    _table(("agent", "seed", *(name for name, _ in VALUE_COLUMNS)), cells)


def _behaviour_table(rows: list[dict[str, Any]], modes: Sequence[str]) -> None:
    columns = BEHAVIOUR_COLUMNS.get(rows[0][modes[0]]["task"], ())
    cells = [
        (
            r["agent"],
            str(r["seed"]),
            mode,
            _fmt(r[mode]["return_mean"]),
            *(_pair(r[mode]["behaviour"], name) for _, name in columns),
        )
        for r in rows
        for mode in modes
    ]
    print("\nBehaviour (in brackets: a uniformly random action in the same states):\n")
    _table(("agent", "seed", "mode", "return", *(c[0] for c in columns)), cells, 3)


def _attention_table(rows: list[dict[str, Any]]) -> None:
    gtrxl = [r for r in rows if any(k.startswith("attention/") for k in r["sampled"]["behaviour"])]
    if not gtrxl:
        return
    columns = (("on earlier steps (uniform)", "earlier_steps"),)
    columns += ATTENTION_COLUMNS.get(gtrxl[0]["sampled"]["task"], ())
    cells = [
        (
            r["agent"],
            str(r["seed"]),
            *(_pair(r["sampled"]["behaviour"], f"attention/L1/{name}") for _, name in columns),
        )
        for r in gtrxl
    ]
    print(
        "\nAttention of layer 1, heads averaged, sampled play (in brackets: uniform attention):\n"
    )
    _table(("agent", "seed", *(c[0] for c in columns)), cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run directories or checkpoints")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=10_000)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = []
    for spec in args.runs:
        results.append(probe_run(spec, args.episodes, args.seed, args.modes))
        print(f"probed {spec}", file=sys.stderr, flush=True)
    print_tables(results, args.modes)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
