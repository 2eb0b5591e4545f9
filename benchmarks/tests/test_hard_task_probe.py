"""benchmarks/hard_task_probe.py measures what its docstring says, from the env's true state."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("popgym")
from popgym.envs.autoencode import AutoencodeEasy  # noqa: E402
from popgym.envs.battleship import BattleshipEasy  # noqa: E402
from popgym.envs.concentration import ConcentrationEasy  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
import hard_task_probe as probe  # noqa: E402

CONFIGS = Path(__file__).parents[2] / "configs" / "memory"


def test_battleship_probe_counts_repeats_and_hits_on_the_true_board() -> None:
    env = BattleshipEasy()
    env.reset(seed=3)
    board = env.board.copy()
    ship = tuple(int(i) for i in np.argwhere(board == 1)[0])
    watcher = probe.BattleshipProbe()
    watcher.start(env)
    for t in range(3):  # the same ship square three times: one hit, then two repeats
        watcher.before(env, t, np.array(ship), None)
        env.step(np.array(ship))
        watcher.after(env, t, None)
    means = watcher.tally.means()
    assert means["repeat"] == pytest.approx(2 / 3)
    assert means["hit"] == pytest.approx(1 / 3)
    # A random shooter repeats 0, 1/64 and 1 - (63/64)^2 of its shots at steps 0, 1, 2.
    assert means["repeat_random"] == pytest.approx((0 + 1 / 64 + 1 - (63 / 64) ** 2) / 3)
    assert means["hit_uniform"] == pytest.approx((12 + 11 + 11) / 64 / 3)
    # Only step 1 follows a new hit (step 1 hit nothing new); its shot is not beside that hit.
    assert means["n/adjacent_after_hit"] == 1 and means["adjacent_after_hit"] == 0.0


def test_concentration_probe_counts_wasted_flips_and_known_matches() -> None:
    env = ConcentrationEasy()
    env.reset(seed=5)
    colours = env.state
    other = int(np.flatnonzero(colours != colours[0])[0])  # shown with card 0, then face down
    fresh = int(np.flatnonzero(colours == colours[other])[1])  # unseen, same colour as `other`
    watcher = probe.ConcentrationProbe()
    watcher.start(env)
    # Pair 1: cards 0 and `other` do not match. Pair 2: `fresh`, then the known `other`: a
    # match taken from memory. Then `fresh` again: it is face up, a wasted flip.
    for t, card in enumerate((0, other, fresh, other, fresh)):
        watcher.before(env, t, np.array(card), None)
        env.step(card)
        watcher.after(env, t, None)
    means = watcher.tally.means()
    assert means["n/known_match_taken"] == 1 and means["known_match_taken"] == 1.0
    # At that second flip card 0 was the one revealed card of the other colour, not taken.
    assert means["n/known_mismatch_taken"] == 1 and means["known_mismatch_taken"] == 0.0
    assert means["known_mismatch_taken_uniform"] == pytest.approx(1 / 52)
    assert means["second_match"] == pytest.approx(1 / 2)
    assert means["wasted"] == pytest.approx(1 / 5)
    assert env.deck["face_up_idx"] == [fresh, other]


def test_autoencode_probe_scores_answers_by_how_far_back_their_card_lies() -> None:
    """Right answers on the first and the last answer, wrong ones between: each lands in the
    band of its distance, and the attention tallied is the weight on the step that showed it."""
    env = AutoencodeEasy()
    env.reset(seed=7)
    shown = []
    watcher = probe.AutoencodeProbe(memory=64)
    watcher.start(env)
    t, terminated = 0, False
    while not terminated:
        if env.mode.value == 1:
            action = 0
            if t == 0:
                shown.append(int(env.deck.suits_idx[env.deck["system"][-1]]))
        else:
            target = int(env.deck.suits_idx[env.deck["system"][-1]])
            answer = len(shown) - 1 - (t - 51)  # reverse order: the last card first
            assert target == shown[answer]
            right = t in (51, 102)
            action = target if right else (target + 1) % 4
        attention = None
        if env.mode.value == 0 and t > 51:
            back = 2 * t - 102
            weights = np.full(min(t, 64) + 1, 0.5 / (min(t, 64) + 1))
            if back < len(weights):
                weights[back] += 0.5  # half the weight on the card's step, half spread
            attention = [weights]
        watcher.before(env, t, np.array(action), attention)
        obs, _, terminated, _, _ = env.step(action)
        if env.mode.value == 1 or t == 50:
            shown.append(int(obs[1]))
        watcher.after(env, t, obs)
        t += 1
    assert t == 103 and len(shown) == 52
    means = watcher.tally.means()
    assert means["n/answer"] == 52 and means["answer"] == pytest.approx(2 / 52)
    # Answers at tokens 51-63 still have their own clock value; 64-83 ask for cards at most
    # 64 steps back; 84-102 for cards further back.
    assert means["n/answer_clocked"] == 13 and means["answer_clocked"] == pytest.approx(1 / 13)
    assert means["n/answer_in_memory"] == 20 and means["answer_in_memory"] == 0.0
    assert means["n/answer_beyond_memory"] == 19 and means["answer_beyond_memory"] == 1 / 19
    assert means["answer_uniform"] == 0.25
    # Attention is tallied for the answers whose card is in view (tokens 52-83).
    assert means["n/attention/L1/shown_step"] == 32
    assert means["attention/L1/shown_step"] > 0.5


@pytest.mark.parametrize("positional", ["relative", "none"])
def test_recorded_step_attention_by_distance_matches_the_whole_sequence(positional: str) -> None:
    """Step by step, ``by_distance(...)[d]`` is the weight on the token d steps back: the same
    weight the core gives that token when it reads the episode whole."""
    from rlformer.core import CoreConfig, MemoryCore

    torch.manual_seed(0)
    cfg = CoreConfig(n_layers=2, d_model=16, n_heads=2, d_ff=32, memory_length=4)
    cfg.positional = positional
    core = MemoryCore(cfg).eval()
    tokens = torch.randn(1, 7, 16)
    with torch.no_grad(), probe.recorded_attention() as whole:
        core(tokens)
    memory = core.initial_memory(1)
    for t in range(7):
        with torch.no_grad(), probe.recorded_attention() as sink:
            memory = core.step(tokens[:, t], memory, torch.tensor([t == 0])).memory
        steps = probe.by_distance(sink, min(t, 4) + 1)
        for layer, weights in enumerate(steps):
            full = whole[layer][0, :, t].mean(dim=0)  # [keys = tokens 0..6]
            expected = [float(full[t - d]) for d in range(len(weights))]
            assert weights == pytest.approx(expected, abs=1e-5)


def test_value_facts_tell_a_clock_from_a_value_that_knows_the_episode() -> None:
    rng = np.random.default_rng(0)
    steps = np.tile(np.arange(10), 50)
    target = -0.1 * steps + rng.normal(0, 0.5, steps.size)
    clock = probe._by_step_mean(steps, target)
    as_clock = probe.value_facts(list(zip(steps, clock, target, target, strict=True)))
    assert as_clock["value_variance_from_step"] == pytest.approx(1.0)
    assert as_clock["explained_variance"] == pytest.approx(as_clock["explained_variance_step_only"])
    assert abs(as_clock["within_step_correlation"]) < 1e-6 or math.isnan(
        as_clock["within_step_correlation"]
    )
    knowing = probe.value_facts(list(zip(steps, target, target, target, strict=True)))
    assert knowing["explained_variance"] == pytest.approx(1.0)
    assert knowing["within_step_correlation"] == pytest.approx(1.0)
    assert probe.discounted_to_go([1.0, 0.0, 2.0], 0.5, 4.0) == pytest.approx([2.0, 2.0, 4.0])


def test_probe_measures_a_freshly_trained_battleship_run(tmp_path: Path) -> None:
    from rlformer.config import load_config
    from rlformer.runs.training import train

    overrides = ["ppo.total_steps=2048", "eval.episodes=2", f"run.root={tmp_path}"]
    run_dir = train(load_config(CONFIGS / "popgym_battleship.yaml", overrides)).run_dir
    result = probe.probe_run(str(run_dir), episodes=2, seed=0, modes=probe.MODES)
    assert result["agent"].startswith("GTrXL") and result["env"] == "popgym-BattleshipEasy-v0"
    assert result["curve"]["entropy_uniform"] == pytest.approx(math.log(64))
    for mode in probe.MODES:
        played = result[mode]
        assert played["task"] == "battleship"
        assert np.isfinite(list(played["value"].values())).all()
        behaviour = played["behaviour"]
        assert 0.0 <= behaviour["repeat"] <= 1.0 and 0.0 <= behaviour["hit"] <= 1.0
        for name in ("earlier_steps", "hit_steps"):
            mass = behaviour.get(f"attention/L1/{name}")
            assert mass is None or 0.0 <= mass <= 1.0
    assert "attention/L1/earlier_steps" in result["sampled"]["behaviour"]
