"""Stateless serving: a session's policy state as an opaque blob that the client carries.

With ``rlformer serve --stateless`` the server keeps nothing between steps: every answer holds
the row's next state, sealed, and the client sends it back with its next step, to any replica.
That makes the state the client's input, so the blob is treated as hostile until proven
otherwise:

- **size-bounded**: a policy's state has fixed shapes, so the largest blob this server can seal
  is known when it starts; anything longer is refused (413) before it is decoded;
- **integrity-checked**: HMAC-SHA256 under a server key (``--state-key-file``, or a random key
  made at start and shared by every replica) over the policy's identity (a hash of its spaces,
  weights and acting settings) and the payload; a blob that was altered, sealed by another key or
  for another policy is refused (400), never replaced by a fresh memory;
- **never unpickled**: the payload is a JSON header of array names, dtypes and shapes followed
  by the arrays' raw little-endian bytes (zlib-compressed when a quarter of it is zero bytes,
  as in a memory that is not full yet, and that makes it smaller), checked against the shapes
  of the policy's own state before any array is built.

Layout, then base64 for JSON: ``b"RFS1" | flags (1) | policy id (8) | HMAC (32) | payload``,
where the payload is ``header length (4, little-endian) | header JSON | array bytes``, and
``flags`` bit 0 says it is compressed. The HMAC covers the full policy hash, the flags and the
payload as sent, so nothing is decompressed before it is authenticated.

What it does not do: the state is readable by the client (integrity, not secrecy), and the
server cannot tell a replayed older blob of the same client from the latest one: the client
owns its state, and forking or rewinding its own episode is its business.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import secrets
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from rlformer.serve.messages import RequestError, jsonable

MAGIC = b"RFS1"
_COMPRESSED = 1
_ID_BYTES, _MAC_BYTES = 8, 32
_PREFIX = len(MAGIC) + 1 + _ID_BYTES + _MAC_BYTES
_DOMAIN = b"rlformer-serve-state/1"
MIN_KEY_BYTES = 32

Leaf = tuple[str, str, tuple[int, ...]]
"""One array of a state: (dotted name, little-endian numpy dtype string, shape)."""


def new_state_key() -> str:
    """A random 256-bit key (hex), made once per server start and shared by its replicas."""
    return secrets.token_hex(MIN_KEY_BYTES)


def read_state_key(path: str | Path) -> str:
    """The key in ``path`` (hex of its bytes, surrounding whitespace ignored): servers started
    with the same file accept each other's blobs, also across restarts."""
    raw = Path(path).read_bytes().strip()
    if len(raw) < MIN_KEY_BYTES:
        raise ValueError(
            f"{path}: a state key needs at least {MIN_KEY_BYTES} bytes, it has {len(raw)} "
            "(make one with: openssl rand -hex 32 > FILE)"
        )
    return raw.hex()


# ------------------------------------------------------------------ policy identity
def policy_fingerprint(policy: Any) -> bytes:
    """SHA-256 of what decides how a policy reads its state: its kind, spaces, weights and
    acting settings. Blobs sealed for one policy are refused by a server running another."""
    from rlformer.export.space_codec import space_to_data

    digest = hashlib.sha256(b"rlformer-serve-policy/1")
    spaces = [space_to_data(policy.observation_space), space_to_data(policy.action_space)]
    _update(digest, "spaces", json.dumps(jsonable(spaces), sort_keys=True).encode())
    _update(digest, "kind", str(policy.info.kind).encode())
    for name, value in sorted(vars(policy).items()):
        for key, data in _identity_parts(name, value, policy):
            _update(digest, key, data)
    return digest.digest()


def _update(digest: Any, key: str, data: bytes) -> None:
    for part in (key.encode(), data):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    return f"{flat.dtype}{tuple(tensor.shape)}".encode() + flat.view(torch.uint8).numpy().tobytes()


def _identity_parts(name: str, value: Any, policy: Any) -> Iterator[tuple[str, bytes]]:
    """The parts of one policy attribute that change its acting (weights, arrays, settings,
    an export's metadata and graph); the info, device and spaces (hashed above) are skipped."""
    if isinstance(value, nn.Module):
        for key, tensor in value.state_dict().items():
            yield f"{name}.{key}", _tensor_bytes(tensor)
    elif isinstance(value, torch.Tensor):
        yield name, _tensor_bytes(value)
    elif isinstance(value, np.ndarray):
        yield name, _tensor_bytes(torch.from_numpy(np.ascontiguousarray(value)))
    elif isinstance(value, bool | int | float | str):
        yield name, repr(value).encode()
    elif isinstance(getattr(value, "meta", None), dict):  # an export's onnxruntime runner
        meta = value.meta
        yield f"{name}.meta", json.dumps(meta, sort_keys=True).encode()
        graph = Path(str(policy.info.name)) / str(meta.get("model_file", ""))
        if graph.is_file():
            yield f"{name}.graph", graph.read_bytes()


# ------------------------------------------------------------------ state trees
def _children(value: Any) -> list[tuple[str, Any]]:
    """The named parts of a state node: NamedTuple / dataclass fields, dict keys."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return list(zip(value._fields, value, strict=True))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]
    if isinstance(value, dict):
        return sorted(value.items())
    raise TypeError(f"a {type(value).__name__} in a policy state cannot be sealed")


def _leaves(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted name, array)`` for every tensor / array of a state, in a fixed order."""
    if value is None:
        return
    if isinstance(value, torch.Tensor | np.ndarray):
        yield prefix, value
        return
    for name, child in _children(value):
        yield from _leaves(child, f"{prefix}.{name}" if prefix else name)


def _as_numpy(value: Any) -> np.ndarray:
    array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value
    return np.ascontiguousarray(array, dtype=np.asarray(array).dtype.newbyteorder("<"))


def _spec(name: str, value: Any) -> Leaf:
    array = _as_numpy(value)
    return name, array.dtype.str, tuple(int(d) for d in array.shape)


def _rebuild(template: Any, arrays: dict[str, np.ndarray], prefix: str = "") -> Any:
    """``template``'s structure with its arrays taken from ``arrays`` (same names)."""
    if template is None:
        return None
    if isinstance(template, torch.Tensor):
        return torch.from_numpy(arrays[prefix]).to(template.device)
    if isinstance(template, np.ndarray):
        return arrays[prefix].astype(template.dtype, copy=False)
    parts = {
        name: _rebuild(child, arrays, f"{prefix}.{name}" if prefix else name)
        for name, child in _children(template)
    }
    if isinstance(template, tuple):
        return type(template)(**parts)
    if isinstance(template, dict):
        return parts
    return type(template)(**parts)


# ------------------------------------------------------------------ the codec
class StateCodec:
    """Seals one row's state into a blob and opens blobs back into states, for one policy.

    Args:
        template: A one-row state with every optional part present (its shapes and dtypes are
            the only ones accepted).
        fingerprint: The policy's :func:`policy_fingerprint`.
        key_hex: The server key (hex, at least 32 bytes).
        compress_level: zlib level for payloads with many zero bytes (1: fast).
    """

    def __init__(
        self, template: Any, fingerprint: bytes, key_hex: str, compress_level: int = 1
    ) -> None:
        key = bytes.fromhex(key_hex)
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"a state key needs at least {MIN_KEY_BYTES} bytes")
        self.template, self.fingerprint, self._key = template, fingerprint, key
        self.level = compress_level
        self.specs = [_spec(name, value) for name, value in _leaves(template)]
        self._header = json.dumps(
            {"v": 1, "arrays": [[n, d, list(s)] for n, d, s in self.specs]}, separators=(",", ":")
        ).encode()
        self.max_payload = (
            4
            + len(self._header)
            + sum(np.dtype(d).itemsize * int(np.prod(s)) for _, d, s in self.specs)
        )
        # the longest blob this codec seals: an uncompressed payload (compression only shrinks)
        self.max_chars = 4 * ((_PREFIX + self.max_payload + 2) // 3)

    @property
    def policy_id(self) -> str:
        """The short policy identity written in clear in every blob (hex)."""
        return self.fingerprint[:_ID_BYTES].hex()

    def _mac(self, flags: int, payload: bytes) -> bytes:
        digest = hmac.new(self._key, digestmod=hashlib.sha256)
        for part in (_DOMAIN, self.fingerprint, bytes([flags]), payload):
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part)
        return digest.digest()

    def seal(self, state: Any) -> str:
        """The blob of one row's state (base64 text for JSON)."""
        leaves = [(name, _as_numpy(value)) for name, value in _leaves(state)]
        if [_spec(name, array) for name, array in leaves] != self.specs:
            raise ValueError("the state does not have the shapes of this policy's state")
        payload = b"".join(
            [struct.pack("<I", len(self._header)), self._header, *(a.tobytes() for _, a in leaves)]
        )
        flags = 0
        # zlib gains ~7% on float noise at ~10x the cost of the rest of sealing, but shrinks
        # zero runs (memory slots not yet filled, a new episode's state) to almost nothing
        if payload.count(0) >= len(payload) // 4:
            packed = zlib.compress(payload, self.level)
            if len(packed) < len(payload):
                flags, payload = _COMPRESSED, packed
        prefix = MAGIC + bytes([flags]) + self.fingerprint[:_ID_BYTES]
        return base64.b64encode(prefix + self._mac(flags, payload) + payload).decode("ascii")

    def open(self, blob: Any) -> Any:
        """The state a blob holds, or a :class:`RequestError` saying why it is refused."""
        raw = self._authenticated(blob)
        flags, payload = raw[len(MAGIC)], raw[_PREFIX:]
        if flags & _COMPRESSED:
            payload = _inflate(payload, self.max_payload)
        return _rebuild(self.template, self._arrays(payload))

    def _authenticated(self, blob: Any) -> bytes:
        if not isinstance(blob, str):
            kind = type(blob).__name__
            raise _bad_state(f"expected the base64 string of a previous answer's state, not {kind}")
        if len(blob) > self.max_chars:
            raise RequestError(
                413,
                f"state: {len(blob)} characters, over the limit of {self.max_chars} for this "
                "policy's state (the longest blob this server seals)",
                "state_too_large",
            )
        try:
            raw = base64.b64decode(blob, validate=True)
        except (binascii.Error, ValueError):
            raise _bad_state("not base64") from None
        if len(raw) < _PREFIX or not raw.startswith(MAGIC):
            raise _bad_state("not a state blob of rlformer serve")
        flags, policy_id = raw[len(MAGIC)], raw[len(MAGIC) + 1 : len(MAGIC) + 1 + _ID_BYTES]
        if policy_id != self.fingerprint[:_ID_BYTES]:
            raise RequestError(
                400,
                f"state: sealed for another policy ({policy_id.hex()}); this server serves "
                f"policy {self.policy_id}, start a new episode with episode_start: true",
                "foreign_state",
            )
        mac, payload = raw[_PREFIX - _MAC_BYTES : _PREFIX], raw[_PREFIX:]
        if flags & ~_COMPRESSED or not hmac.compare_digest(mac, self._mac(flags, payload)):
            raise RequestError(
                400,
                "state: fails its integrity check (altered, or sealed by a server with another "
                "key; without --state-key-file each server start makes a new key)",
                "state_tampered",
            )
        return raw

    def _arrays(self, payload: bytes) -> dict[str, np.ndarray]:
        """The arrays of an authenticated payload, checked against this policy's state."""
        size = len(self._header)
        if payload[:4] != struct.pack("<I", size) or payload[4 : 4 + size] != self._header:
            raise _bad_state("its arrays are not the shapes of this policy's state")
        arrays, offset = {}, 4 + size
        for name, dtype, shape in self.specs:
            count = int(np.prod(shape))
            nbytes = np.dtype(dtype).itemsize * count
            chunk = payload[offset : offset + nbytes]
            if len(chunk) != nbytes:
                raise _bad_state("truncated")
            arrays[name] = np.frombuffer(chunk, dtype=dtype).reshape(shape).copy()
            offset += nbytes
        if offset != len(payload):
            raise _bad_state("trailing bytes after its arrays")
        return arrays


def _inflate(payload: bytes, limit: int) -> bytes:
    """Decompress at most ``limit`` bytes (a valid blob never inflates beyond it)."""
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(payload, limit)
    except zlib.error:
        raise _bad_state("its compressed payload is corrupt") from None
    if inflater.unconsumed_tail or not inflater.eof:
        raise _bad_state("its payload inflates beyond this policy's state size")
    return data


def _bad_state(message: str) -> RequestError:
    return RequestError(400, f"state: {message}", "bad_state")
