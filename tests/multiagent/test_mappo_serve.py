"""``rlformer serve`` of a multi-agent team through real HTTP: one session per episode holding
every agent's memory. Interleaved episodes take the actions the rollout worker takes on the same
episodes (agents joining late and leaving early included), from a checkpoint and from its
export; malformed requests get a 4xx JSON line and leave other sessions alone."""

from __future__ import annotations

import functools
import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
import torch

pytest.importorskip("pettingzoo")

from rlformer.algos.mappo.algorithm import describe_team  # noqa: E402
from rlformer.algos.mappo.config import MAPPOConfig, mappo_section  # noqa: E402
from rlformer.algos.mappo.team import make_parallel_env  # noqa: E402
from rlformer.algos.mappo.worker import MultiAgentWorker  # noqa: E402
from rlformer.config import load_config  # noqa: E402
from rlformer.policies import load_policy  # noqa: E402
from rlformer.runs.checkpoints import write_checkpoint_file  # noqa: E402
from rlformer.serve import ServeOptions, load_servable, start  # noqa: E402
from tests.serve.shared_serve import delete_apps, serve_port  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.ray]

STAGGERED = "rlformer_envs.staggered:parallel_env"  # agents join at 0, 0, 2, leave at 3, 6, 8
OVERRIDES = [
    "algo=mappo",
    f"mappo.env={STAGGERED}",
    "model.core={n_layers: 1, d_model: 16, n_heads: 2, d_ff: 32, memory_length: 8}",
    "model.prev_action_reward=true",  # the rewards of a request reach the model
]
SESSIONS, EPISODES, TIMEOUT = 8, 2, 30


def _checkpoint(path: Path) -> Path:
    """An untrained team (central critic, agent ids) with weights spread wide enough that its
    logits are far apart (a near-uniform head would tie argmaxes to float noise), and that
    reads its previous reward (the input's last feature) strongly enough to change actions."""
    cfg = load_config(None, OVERRIDES)
    _, model = describe_team(cfg)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.5)
        for name, param in model.named_parameters():
            if name.endswith("actor_torso.embed.weight"):
                param[:, -1] *= 10.0
            if name.endswith("bias"):
                param.zero_()  # biases as wide as the weights would drown the inputs
    payload = {"kind": "mappo", "config": cfg.model_dump(mode="json"), "model": model.state_dict()}
    write_checkpoint_file(path, payload)
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, local_ray: None) -> Iterator[dict[str, Any]]:
    """The team's checkpoint (2 replicas) and its export on the serving modules' Serve."""
    pytest.importorskip("onnxruntime")
    root = tmp_path_factory.mktemp("team")
    checkpoint = _checkpoint(root / "team.pt")
    export = load_policy(checkpoint).export_to(root / "export")
    port = serve_port()
    try:
        options = ServeOptions(replicas=2, max_batch=32)
        start(load_servable(checkpoint), options, port=port, route_prefix="/run", name="run")
        options = ServeOptions(replicas=1, max_batch=32)
        start(load_servable(export), options, port=port, route_prefix="/export", name="export")
        yield {"url": f"http://127.0.0.1:{port}", "checkpoint": checkpoint}
    finally:
        delete_apps("run", "export")


@functools.cache
def _offline(checkpoint: Path, seed: int) -> list[dict[str, int]]:
    """Each step's greedy actions, per agent, of the episode from env seed ``seed`` played by
    the rollout worker (evaluation mode), as training and ``rlformer eval`` play it."""
    policy = load_policy(checkpoint)
    cfg = policy.cfg  # type: ignore[attr-defined]
    worker = MultiAgentWorker(mappo_section(cfg), cfg.model, 1, 12, seed, evaluation=True,
                              deterministic=True)  # fmt: skip
    worker.set_weights(policy.weights, 0)  # type: ignore[attr-defined]
    rollout = worker.sample()
    length = rollout.episodes[0].length
    steps: list[dict[str, int]] = [{} for _ in range(length)]
    for group in worker.team.groups:
        fragment = rollout.fragments[group.name]
        for t in range(length):
            for k, agent in enumerate(group.agents):
                if fragment.valid[t, k]:
                    steps[t][agent] = int(fragment.actions[t, k])
    worker.close()
    return steps


def _post(url: str, sid: str, body: Any) -> requests.Response:
    return requests.post(f"{url}/v1/sessions/{sid}/act", json=body, timeout=TIMEOUT)


def _play(url: str, sid: str, seeds: list[int], pause: random.Random) -> list[list[dict]]:
    """Episodes from env seeds ``seeds`` played through the server, one session for all:
    each step sends the present agents' observations and their last rewards."""
    env = make_parallel_env(MAPPOConfig(env=STAGGERED))
    played = []
    for seed in seeds:
        observations, _ = env.reset(seed=seed)
        rewards: dict[str, float] | None = None
        steps = []
        while env.agents:
            time.sleep(pause.uniform(0, 0.01))  # shuffles the interleaving between sessions
            body = {
                "observations": {a: observations[a].tolist() for a in env.agents},
                "rewards": rewards,
                "episode_start": rewards is None,
            }
            answer = _post(url, sid, body)
            assert answer.status_code == 200, answer.text
            actions = answer.json()["actions"]
            assert set(actions) == set(env.agents)
            steps.append(actions)
            observations, reward, _, _, _ = env.step(actions)
            rewards = {a: float(r) for a, r in reward.items()}
        played.append(steps)
    return played


@pytest.mark.parametrize("app", ["run", "export"])
def test_interleaved_team_episodes_take_the_offline_actions(
    server: dict[str, Any], app: str
) -> None:
    url = f"{server['url']}/{app}"
    plans = {f"{app}-{i}": [EPISODES * i + e for e in range(EPISODES)] for i in range(SESSIONS)}
    expected = {
        sid: [_offline(server["checkpoint"], seed) for seed in seeds]
        for sid, seeds in plans.items()
    }
    with ThreadPoolExecutor(SESSIONS) as pool:
        futures = {
            sid: pool.submit(_play, url, sid, seeds, random.Random(i))
            for i, (sid, seeds) in enumerate(plans.items())
        }
        got = {sid: future.result(timeout=180) for sid, future in futures.items()}
    assert got == expected
    # the late agent's first actions come from a fresh memory: it joined at step 2
    assert all("agent_2" not in step for step in got[f"{app}-0"][0][:2])
    health = requests.get(f"{url}/v1/health", timeout=TIMEOUT).json()
    sizes = {int(k): v for k, v in health["batch_sizes"].items()}
    assert max(sizes) > 1, f"no forward pass held more than one agent: {sizes}"
    assert health["sessions"] == SESSIONS


def test_the_team_is_described(server: dict[str, Any]) -> None:
    described = requests.get(f"{server['url']}/run/v1/policy", timeout=TIMEOUT).json()
    assert described["team"]["groups"] == {"agent": ["agent_0", "agent_1", "agent_2"]}
    assert described["team"]["agents"]["agent_2"]["index"] == 2
    assert described["info"]["task"] == STAGGERED


GOOD = {"agent_0": [0.0, 1.0], "agent_1": [0.0, 1.0]}
BAD_BODIES: list[tuple[str, Any, int]] = [
    ("not an object", [1, 2], 400),
    ("unknown field", {"observations": GOOD, "episode_start": True, "observation": 1}, 400),
    ("observations not an object", {"observations": [0.0, 1.0], "episode_start": True}, 400),
    ("no agent", {"observations": {}, "episode_start": True}, 400),
    ("unknown agent", {"observations": {"agent_9": [0.0, 1.0]}, "episode_start": True}, 400),
    ("wrong shape", {"observations": {"agent_0": [0.0]}, "episode_start": True}, 400),
    ("reward not a number", {"observations": GOOD, "rewards": {"agent_0": "1"}}, 400),
    ("reward of no agent", {"observations": GOOD, "rewards": {"bob": 1.0}}, 400),
    ("flag not bool", {"observations": GOOD, "episode_start": 1}, 400),
    ("mask of no action", {"observations": GOOD, "action_masks": {"agent_0": [0, 0]}}, 400),
    ("mask too short", {"observations": GOOD, "action_masks": {"agent_0": [True]}}, 400),
    ("mask of no agent", {"observations": GOOD, "action_masks": {"bob": [True, True]}}, 400),
    ("unknown session", {"observations": GOOD, "episode_start": False}, 409),
]


@pytest.mark.parametrize(("what", "body", "status"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_bad_team_requests_are_a_4xx_json_line(
    server: dict[str, Any], what: str, body: Any, status: int
) -> None:
    url = f"{server['url']}/run"
    bystander = f"bystander-{len(what)}"
    seeds = [500 + len(what)]
    answer = requests.post(
        f"{url}/v1/sessions/victim-{len(what)}/act", data=json.dumps(body), timeout=TIMEOUT
    )
    assert answer.status_code == status, answer.text
    assert answer.text.count("\n") <= 1 and "error" in answer.json()
    got = _play(url, bystander, seeds, random.Random(0))
    assert got == [_offline(server["checkpoint"], seeds[0])]


def test_cli_refuses_a_stateless_team_in_one_line(server: dict[str, Any]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rlformer.cli", "serve", str(server["checkpoint"]), "--stateless"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "one session per episode" in lines[0], done.stderr


def test_rewards_reach_a_model_that_reads_them(server: dict[str, Any]) -> None:
    """Same observations, other rewards: other actions somewhere (the previous-reward input)."""
    url = f"{server['url']}/run"
    rng = np.random.default_rng(0)
    differs = False
    for trial in range(20):
        obs = {a: rng.uniform(-1, 1, 2).round(3).tolist() for a in ("agent_0", "agent_1")}
        answers = []
        for variant, reward in enumerate((0.0, 5.0)):
            sid = f"reward-{trial}-{variant}"
            _post(url, sid, {"observations": obs, "episode_start": True})
            body = {"observations": obs, "rewards": {"agent_0": reward, "agent_1": reward}}
            answers.append(_post(url, sid, body).json()["actions"])
        differs |= answers[0] != answers[1]
    assert differs


@pytest.mark.parametrize("app", ["run", "export"])
def test_action_masks_rule_out_actions_per_agent(server: dict[str, Any], app: str) -> None:
    """Whatever the team would choose, an agent whose mask allows one action takes it; an
    agent sent without a mask in the same request acts as it would alone."""
    url = f"{server['url']}/{app}"
    rng = np.random.default_rng(1)
    for trial in range(10):
        obs = {a: rng.uniform(-1, 1, 2).round(3).tolist() for a in ("agent_0", "agent_1")}
        free = _post(url, f"free-{trial}", {"observations": obs, "episode_start": True})
        forced = 1 - free.json()["actions"]["agent_0"]
        body = {
            "observations": obs,
            "episode_start": True,
            "action_masks": {"agent_0": [forced == 0, forced == 1]},
        }
        answer = _post(url, f"masked-{trial}", body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["actions"] == {**free.json()["actions"], "agent_0": forced}
