"""Runs ``rlformer export`` directories with numpy + onnxruntime only (no torch, no rlformer:
copy it anywhere). The state is a dict of batch-first arrays that the caller holds.

Reads policy formats 1 and 2 (``format_version`` in ``policy.json``). Inputs the caller leaves
out (``reward``, ``action_mask``, ``noise``) are fed their ``default`` from ``policy.json``
(format 1, which has none: 0, all True, 0). Rows that cannot be acted on (a non-finite
observation value, an action mask that allows no action) are refused with
:class:`InvalidRowsError`, before any action or state is returned.
"""

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort

FORMATS = (1, 2)
LEGACY_DEFAULTS = {"reward": 0.0, "action_mask": True, "noise": 0.0}  # format 1


class InvalidRowsError(ValueError):
    """Rows of a batch that cannot be acted on; ``rows`` maps each row index to the reason."""

    def __init__(self, rows: dict) -> None:
        self.rows = dict(rows)
        reasons = "; ".join(f"row {row}: {why}" for row, why in sorted(self.rows.items()))
        super().__init__(f"invalid input, no action taken: {reasons}")

    def __reduce__(self) -> tuple:
        return type(self), (self.rows,)


class OnnxPolicy:
    """An exported policy acting on batches as a Gymnasium vector env gives them."""

    def __init__(self, export_dir: str | Path, threads: int = 0) -> None:
        root = Path(export_dir)
        meta = json.loads((root / "policy.json").read_text())
        self._build(meta, (root / meta["model_file"]).read_bytes(), threads)

    @classmethod
    def from_bytes(cls, meta: dict, model: bytes, threads: int = 0) -> "OnnxPolicy":
        """The policy of a ``policy.json`` already read and its model file's bytes."""
        policy = cls.__new__(cls)
        policy._build(meta, model, threads)
        return policy

    def _build(self, meta: dict, model: bytes, threads: int) -> None:
        version = meta.get("format_version", 1)
        if version not in FORMATS:
            raise ValueError(f"policy format {version} is newer than this runner's {FORMATS}")
        self.meta, self.model, self.threads = meta, model, threads
        options = ort.SessionOptions()  # threads 0: onnxruntime's default
        options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self.outputs = [spec["name"] for spec in meta["outputs"]]
        self.components = meta.get("action_mask_components") or (meta["sampling"] or {}).get("nvec")

    def __getstate__(self) -> dict:  # an InferenceSession does not pickle: rebuilt from bytes
        return {"meta": self.meta, "model": self.model, "threads": self.threads}

    def __setstate__(self, state: dict) -> None:
        self._build(state["meta"], state["model"], state["threads"])

    def initial_state(self, n: int, target_return: float | None = None) -> dict:
        target = self.meta["default_target_return"] if target_return is None else target_return
        state = {}
        for spec in self.meta["inputs"]:
            if spec.get("role") == "state":
                fill = target if spec["initial"] == "target_return" else spec["initial"]
                shape = [n if d == "batch" else d for d in spec["shape"]]
                state[spec["name"]] = np.full(shape, fill, dtype=spec["dtype"])
        return state

    def invalid_rows(self, obs: object, action_mask: np.ndarray | None = None) -> dict:
        """``{row: reason}`` for the rows :meth:`act` would refuse (empty when all are fine)."""
        rows = {}
        for spec in self.meta["inputs"]:
            if spec.get("role") == "observation" and np.dtype(spec["dtype"]).kind == "f":
                value = np.asarray(_leaf(obs, spec["leaf"]), dtype=np.float64)
                finite = np.isfinite(value.reshape(len(value), -1)).all(axis=1)
                for row in np.flatnonzero(~finite):
                    rows.setdefault(int(row), f"observation {spec['name']} has a non-finite value")
        if action_mask is not None:
            mask = np.asarray(action_mask, dtype=bool).reshape(len(action_mask), -1)
            sizes = self.components or [mask.shape[1]]
            for k, part in enumerate(np.split(mask, np.cumsum(sizes)[:-1], axis=1)):
                for row in np.flatnonzero(~part.any(axis=1)):
                    where = f" in action component {k}" if len(sizes) > 1 else ""
                    rows.setdefault(int(row), f"the action mask allows no action{where}")
        return rows

    def run(
        self, obs: object, state: dict, episode_start: np.ndarray, reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None, noise: object = None,
    ) -> dict:  # fmt: skip
        """Every output of one step by name (``noise``: a function of the shape to feed, or
        None for the default); :class:`InvalidRowsError` for rows that cannot be acted on."""
        n, feed = len(episode_start), dict(state)  # the state inputs, then the step's own
        given = {"episode_start": episode_start, "reward": reward, "action_mask": action_mask}
        for spec in self.meta["inputs"]:
            role, shape = spec.get("role"), [n if d == "batch" else d for d in spec["shape"]]
            if role == "observation":
                value = _leaf(obs, spec["leaf"])
            elif role == "noise" and noise is not None:
                value = noise(shape)
            elif role in given or role == "noise":
                value = given.get(role)
                if value is None:
                    value = np.full(shape, spec.get("default", LEGACY_DEFAULTS.get(role)))
            else:
                continue
            feed[spec["name"]] = np.asarray(value).astype(spec["dtype"]).reshape(shape)
        out = dict(zip(self.outputs, self.session.run(self.outputs, feed), strict=True))
        valid = out.get("input_valid")  # format 1 graphs have no flag: checked here instead
        if valid is None or not valid.all():
            rows = self.invalid_rows(obs, action_mask)
            if valid is not None:
                for row in np.flatnonzero(~valid):
                    rows.setdefault(int(row), "the graph marked its inputs invalid")
            if rows:
                raise InvalidRowsError(rows)
        return out

    def act(
        self, obs: object, state: dict, episode_start: np.ndarray, reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None, deterministic: bool = True, rng: object = None,
    ) -> tuple[np.ndarray, dict]:  # fmt: skip
        n, rng = len(episode_start), rng or np.random.default_rng()
        sampling = self.meta["sampling"] or {}
        if not deterministic and not sampling:
            raise ValueError(f"cannot sample actions: {self.meta['sampling_problem']}")
        noise = None  # zeros (the default): the most likely action; else the graph samples
        if not deterministic and sampling["distribution"] == "noise_input":
            kind = sampling["noise_kind"]
            noise = {"gumbel": rng.gumbel, "logistic": rng.logistic}.get(kind, rng.normal)
            noise = lambda shape, draw=noise: draw(size=shape)  # noqa: E731
        out = self.run(obs, state, episode_start, reward, action_mask, noise)
        state = {name: out["next_" + name] for name in state}
        if deterministic or sampling["distribution"] == "noise_input":
            return out["action"], state
        sample, action = _sample(out, sampling, rng)
        if (name := sampling["model_action_state"]) is not None:  # the next previous action
            state[name] = sample.reshape(state[name].shape).astype(state[name].dtype)
        return action.reshape(n, *sampling["shape"]).astype(sampling["dtype"]), state


def _leaf(obs: object, path: str) -> object:
    """A leaf of nested dicts / tuples of batched arrays ("" for a flat observation)."""
    for key in path.split("/") if path else []:
        obs = obs[key] if isinstance(obs, dict) else obs[int(key)]
    return obs


def _sample(out: dict, spec: dict, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(sample in the model's format, env action), as ``policy.json``'s sampling says."""
    if spec["distribution"] == "categorical":  # Gumbel-max per component
        logits = np.split(out["logits"], np.cumsum(spec["nvec"])[:-1], axis=1)
        sample = np.stack([np.argmax(x + rng.gumbel(size=x.shape), 1) for x in logits], 1)
        return sample, sample + np.asarray(spec["start"])
    if spec["distribution"] == "bernoulli":
        sample = (rng.random(out["logits"].shape) < 1 / (1 + np.exp(-out["logits"]))) * 1
        return sample, sample
    noise = rng.standard_normal(out["mean"].shape)
    sample = (out["mean"] + np.exp(out["log_std"]) * noise).astype(np.float32)
    return sample, np.clip(sample, *(np.array(spec[k], dtype=np.float64) for k in ("low", "high")))
