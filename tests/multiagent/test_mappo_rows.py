"""Multi-agent rollouts as batch rows: presence, memory restarts, the masked PPO update and the
two critics, on real PettingZoo Parallel envs (envs/staggered.py, envs/relay.py, mpe2)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")

from rlformer.algos.mappo.team import build_team, make_parallel_env  # noqa: E402
from rlformer.algos.mappo.worker import MultiAgentWorker  # noqa: E402
from rlformer.algos.ppo.learner import PPOLearner, make_sequence_batch, ppo_loss  # noqa: E402
from rlformer.config import build_config  # noqa: E402
from rlformer.rollout.env_factory import EnvError  # noqa: E402

STAGGERED = "rlformer_envs.staggered:parallel_env"
RELAY = "rlformer_envs.relay:parallel_env"


def _cfg(env: str = STAGGERED, **mappo: Any) -> Any:
    raw = {
        "algo": "mappo",
        "mappo": {"env": env, **mappo},
        "model": {"core": {"n_layers": 1, "d_model": 32, "n_heads": 2, "d_ff": 64}},
    }
    return build_config(raw)


def _worker(cfg: Any, envs: int = 3, steps: int = 24, seed: int = 0) -> MultiAgentWorker:
    worker = MultiAgentWorker(cfg.mappo, cfg.model, envs, steps, seed)
    worker.set_weights(worker.models.state_dict(), 0)
    return worker


def test_rows_follow_agents_that_join_late_and_leave_early() -> None:
    worker = _worker(_cfg(), envs=2, steps=20)
    fragment = worker.sample().fragments["agent"]
    # Staggered: agent 0 is present at steps 0-3, agent 1 at 0-6, agent 2 at 2-8; an episode
    # is 9 env steps, then the env resets: rows are env-major, agent-minor.
    presence = np.zeros((9, 3), dtype=bool)
    presence[0:4, 0], presence[0:7, 1], presence[2:9, 2] = True, True, True
    want = np.concatenate([presence, presence, presence[:2]])  # 20 steps: 9 + 9 + 2
    for env in range(2):
        rows = slice(3 * env, 3 * env + 3)
        np.testing.assert_array_equal(fragment.valid[:, rows], want)
        starts = fragment.episode_start[:, rows]
        # Memory restarts where each agent's episode starts: steps 0, 9, 18 for agents 0 and 1,
        # 2 and 11 for the late one.
        assert np.flatnonzero(starts[:, 0]).tolist() == [0, 9, 18]
        assert np.flatnonzero(starts[:, 2]).tolist() == [0, 2, 11]
        ends = fragment.terminated[:, rows] & fragment.valid[:, rows]
        assert np.flatnonzero(ends[:, 0]).tolist() == [3, 12]
        assert np.flatnonzero(ends[:, 2]).tolist() == [8, 17]
        # An absent step is terminated too: GAE never reads across the gap.
        assert fragment.terminated[:, rows][~fragment.valid[:, rows]].all()


@pytest.mark.parametrize("truncate", [False, True])
@pytest.mark.parametrize("torso", ["gtrxl", "lstm"])
def test_first_epoch_ratio_is_one_with_agents_finishing_apart(truncate: bool, torso: str) -> None:
    cfg = _cfg(env_kwargs={"truncate": truncate})
    cfg.model.torso = torso
    worker = _worker(cfg, envs=3, steps=30)
    worker.sample()  # the second fragment starts mid-episode, from carried memory
    fragment = worker.sample().fragments["agent"]
    if truncate:
        assert fragment.truncated.any() and fragment.truncation_values[fragment.truncated].any()
    model = worker.models["agent"]
    batch = make_sequence_batch(fragment, cfg.ppo, torch.device("cpu"))
    with torch.no_grad():
        out = model.evaluate(batch.obs, batch.actions, batch.state, batch.episode_start)
    valid = batch.valid
    assert valid is not None and not valid.all()
    error = (out.log_prob - batch.old_log_probs).abs()[valid]
    assert float(error.max()) < 1e-5
    values = (out.value - batch.old_values).abs()[valid]
    assert float(values.max()) < 1e-4
    # The learner's own first minibatch sees ratio 1 too.
    learner = PPOLearner(model, cfg.ppo.model_copy(update={"update_epochs": 1}), "cpu", 1)
    metrics = learner.update(fragment)
    assert metrics["ppo/first_minibatch_ratio_error"] < 1e-5


def test_absent_steps_do_not_enter_the_loss() -> None:
    cfg = _cfg()
    worker = _worker(cfg, envs=2, steps=16)
    fragment = worker.sample().fragments["agent"]
    model = worker.models["agent"]
    batch = make_sequence_batch(fragment, cfg.ppo, torch.device("cpu"))
    out = model.evaluate(batch.obs, batch.actions, batch.state, batch.episode_start)
    loss, _ = ppo_loss(out, batch, cfg.ppo)
    assert batch.valid is not None
    absent = ~batch.valid
    noise = torch.randn_like(batch.advantages) * 100
    scrambled = batch._replace(
        advantages=torch.where(absent, noise, batch.advantages),
        returns=torch.where(absent, noise, batch.returns),
        old_log_probs=torch.where(absent, noise, batch.old_log_probs),
    )
    scrambled_loss, _ = ppo_loss(out, scrambled, cfg.ppo)
    assert torch.allclose(loss, scrambled_loss)


def _acting_outputs(worker: MultiAgentWorker, group: str, obs: Any) -> Any:
    model = worker.models[group]
    rows = next(iter(obs.values())).shape[0]
    state = model.initial_state(rows)
    starts = torch.ones(rows, dtype=torch.bool)
    obs = {k: torch.as_tensor(v) for k, v in obs.items()}
    return model.act(obs, state, starts, deterministic=True)


def test_central_critic_reads_the_state_and_the_actor_never_does() -> None:
    cfg = _cfg("mpe2.simple_spread_v3:parallel_env", env_kwargs={"N": 3, "max_cycles": 25})
    worker = _worker(cfg, envs=2, steps=4)
    fragment = worker.sample().fragments["agent"]
    obs = {k: v[0] for k, v in fragment.obs.items()}
    assert obs["state"].shape == (6, 54)  # simple_spread's state(): every agent's view
    first = _acting_outputs(worker, "agent", obs)
    moved = {**obs, "state": obs["state"] + 5.0}
    second = _acting_outputs(worker, "agent", moved)
    assert torch.equal(first.log_prob, second.log_prob)
    assert not torch.allclose(first.value, second.value)
    model = worker.models["agent"]
    assert "state" not in model.encoder.leaves and "state" in model.critic_encoder.leaves


@pytest.mark.parametrize("truncate", [False, True])
def test_the_central_critic_reads_the_state_only_where_it_is_used(truncate: bool) -> None:
    # Staggered with a state that, as in SISL's multiwalker, cannot be read once the episode
    # has terminated: a read for the fragment's first observations, one per env step for the
    # next ones, one more where the episode was truncated (its last value is bootstrapped from
    # the state), never after a termination.
    cfg = _cfg(STAGGERED, env_kwargs={"state": True, "truncate": truncate})
    worker = _worker(cfg, envs=2, steps=20)
    assert worker.team.critic_input == "state"
    before = [env.state_reads for env in worker.envs]
    fragment = worker.sample().fragments["agent"]
    reads = [env.state_reads - b for env, b in zip(worker.envs, before, strict=True)]
    ends = 2  # 9-step episodes end at steps 8 and 17 of the 20
    assert reads == [1 + 20 + (ends if truncate else 0)] * 2
    assert np.isfinite(fragment.truncation_values).all()
    assert (fragment.truncated.sum() > 0) == truncate


def test_independent_critics_read_what_their_actor_reads() -> None:
    cfg = _cfg(RELAY, critic="independent", agent_id=False)
    worker = _worker(cfg, envs=2, steps=4)
    assert worker.team.critic_input is None
    for group in ("speaker", "listener"):
        model = worker.models[group]
        assert model.critic_encoder is None
        assert worker.team.group(group).observation_space.shape == (5,)


def test_a_central_critic_without_env_state_reads_every_agents_observation() -> None:
    cfg = _cfg(RELAY)
    env = make_parallel_env(cfg.mappo)
    team = build_team(cfg.mappo, env)
    assert team.critic_input == "observations" and team.state_size == 10
    with pytest.raises(EnvError, match="has no state_space"):
        build_team(_cfg(RELAY, critic_input="state").mappo, env)


def test_groups_map_agents_to_networks() -> None:
    env_name = "mpe2.simple_speaker_listener_v4:parallel_env"
    team = build_team(_cfg(env_name).mappo, make_parallel_env(_cfg(env_name).mappo))
    assert [(g.name, g.agents) for g in team.groups] == [
        ("speaker", ("speaker_0",)),
        ("listener", ("listener_0",)),
    ]
    custom = _cfg(STAGGERED, groups={"early": ["agent_0", "agent_1"], "late": ["agent_2"]})
    team = build_team(custom.mappo, make_parallel_env(custom.mappo))
    assert [g.size for g in team.groups] == [2, 1]


@pytest.mark.parametrize(
    ("mappo", "message"),
    [
        (
            {"env": "mpe2.simple_speaker_listener_v4:parallel_env",
             "groups": {"all": ["speaker_0", "listener_0"]}},
            "group 'all' shares one network, but agent 'listener_0'",
        ),
        ({"env": STAGGERED, "groups": {"a": ["agent_0", "agent_9"]}}, "agent 'agent_9'"),
        ({"env": STAGGERED, "groups": {"a": ["agent_0"]}}, "agent_1, agent_2 in no group"),
        ({"env": "mpe2.simple_spread_v3:env"}, "aec_to_parallel"),
        ({"env": "rlformer_envs.nowhere:parallel_env"}, "cannot import module"),
    ],
)  # fmt: skip
def test_bad_teams_get_one_line(mappo: dict[str, Any], message: str) -> None:
    cfg = _cfg(**mappo)
    with pytest.raises(EnvError, match=message) as caught:
        build_team(cfg.mappo, make_parallel_env(cfg.mappo))
    assert "\n" not in str(caught.value)


def test_relay_controls_oracle_and_chance() -> None:
    from rlformer_envs.relay import RelayEnv

    def success(env: RelayEnv, policy: Any, episodes: int = 400) -> float:
        wins = 0
        for seed in range(episodes):
            env.reset(seed=seed)
            while env.agents:
                _, _, _, _, infos = env.step(policy(env))
            wins += bool(infos["listener_0"]["is_success"])
        return wins / episodes

    rng = np.random.default_rng(0)
    assert success(RelayEnv(delay=20), RelayEnv.oracle_actions) == 1.0
    cut = success(RelayEnv(delay=20, channel=False), RelayEnv.oracle_actions)
    guess = success(RelayEnv(delay=20), lambda e: {a: int(rng.integers(4)) for a in e.agents})
    for rate in (cut, guess):
        assert 0.18 < rate < 0.32  # chance: 1 / 4
