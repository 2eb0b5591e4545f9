"""The environment an embedded Ray is started with for serving: its processes inherit it."""

from __future__ import annotations

import os

import pytest
import ray

from rlformer.serve.launch import PROXY_READY_ENV, PROXY_READY_TIMEOUT_S, _init_ray


def _environment_at_ray_init(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    seen: dict[str, str] = {}
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "init", lambda **_: seen.update(os.environ))
    _init_ray(None)
    return seen


def test_serve_proxies_get_time_to_start_on_a_busy_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(PROXY_READY_ENV, raising=False)
    assert _environment_at_ray_init(monkeypatch)[PROXY_READY_ENV] == PROXY_READY_TIMEOUT_S


def test_a_users_own_proxy_timeout_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROXY_READY_ENV, "7")
    assert _environment_at_ray_init(monkeypatch)[PROXY_READY_ENV] == "7"
