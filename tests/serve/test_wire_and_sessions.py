"""The request checks and session bookkeeping of the server without Ray: what a malformed
observation is told, what a deleted session's next step hears, and that a stored session row
owns its tensors instead of viewing its batch's."""

from __future__ import annotations

import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlformer.policies import load_policy
from rlformer.serve.batched_steps import parse_step, row_ops, step_batch
from rlformer.serve.messages import RequestError, decode
from rlformer.serve.sessions import SessionStore
from tests.serve.test_serve_http import APPS, _checkpoint

BOX = gym.spaces.Box(-5.0, 5.0, (2,), np.float32)
BOOL_BOX = gym.spaces.Box(0, 1, (2,), dtype=bool)


@pytest.mark.parametrize(
    ("space", "value", "message"),
    [
        (BOX, ["a", "b"], "expected numbers, got strings"),
        (BOX, [None, 1], "got values of type int, null"),
        (BOX, [{"x": 1}, 2], "objects"),
        (BOOL_BOX, [0.5, 1], "boolean Box"),
        (BOOL_BOX, [2, 0], "boolean Box"),
    ],
)
def test_malformed_values_are_named_in_the_clients_words(
    space: gym.Space, value: object, message: str
) -> None:
    with pytest.raises(RequestError, match=message) as refused:
        decode(space, value)
    assert refused.value.status == 400
    assert not re.search(r"(str|int|float|<U)\d", str(refused.value)), "a NumPy dtype name"


def test_booleans_and_out_of_bounds_values_are_accepted_as_the_env_would_give_them() -> None:
    assert decode(BOOL_BOX, [True, 0]).tolist() == [[True, False]]
    # Box bounds are not enforced (Gymnasium does not either): see rlformer.serve.messages
    assert decode(BOX, [1000, -7.5]).tolist() == [[1000.0, -7.5]]


def test_a_deleted_session_says_so_and_an_unknown_one_does_not() -> None:
    store = SessionStore(ttl_s=60, max_sessions=4)
    store.put("a", 1)
    assert store.delete("a") and not store.delete("a")
    with pytest.raises(RequestError, match="deleted") as deleted:
        store.get("a")
    assert deleted.value.status == 409 and deleted.value.code == "session_dropped"
    assert not store.delete("never")
    with pytest.raises(RequestError) as unknown:
        store.get("never")
    assert unknown.value.code == "unknown_session"
    store.put("a", 2)  # a new episode under the same id clears the tombstone
    assert store.get("a") == 2


@pytest.mark.parametrize("name", list(APPS))
def test_a_stored_session_owns_its_state(tmp_path: Path, name: str) -> None:
    """Rows of a batch of 8 are stored; none of their tensors shares the batch's storage."""
    policy = load_policy(_checkpoint(tmp_path, name, APPS[name][0]))
    ops, store = row_ops(policy), SessionStore(60, 100)
    body = {"observation": [0.1, 0.2, 0.3], "episode_start": True}
    requests = [parse_step(policy, f"s{i}", body) for i in range(8)]
    assert all("action" in r for r in step_batch(policy, ops, store, requests))
    for i in range(8):
        tensors = _tensors(store.get(f"s{i}"))
        assert tensors
        for tensor in tensors:
            assert tensor.shape[0] == 1 or tensor.shape[1] == 1  # one row (memory: [L, 1, ...])
            size = tensor.untyped_storage().nbytes()
            assert size == tensor.numel() * tensor.element_size(), "a view into the batch"


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, tuple):
        return [t for v in value for t in _tensors(v)]
    if hasattr(value, "__dataclass_fields__"):
        return [t for f in value.__dataclass_fields__ for t in _tensors(getattr(value, f))]
    return []


def test_a_mask_with_a_component_that_allows_nothing_is_refused() -> None:
    """Such a row would make an export refuse its whole batch: refused alone, with a 400."""
    from rlformer.serve.messages import decode_mask

    space = gym.spaces.MultiDiscrete([2, 3])
    assert decode_mask(space, [True, False, False, True, False]).sum() == 2
    with pytest.raises(RequestError, match="no action in action component 1") as refused:
        decode_mask(space, [True, True, False, False, False])
    assert refused.value.status == 400
    with pytest.raises(RequestError, match="allows no action$"):
        decode_mask(gym.spaces.Discrete(3), [False, False, False])
