"""Runs ``rlformer export`` directories with numpy + onnxruntime only (no torch, no rlformer:
copy it anywhere). The state is a dict of batch-first arrays that the caller holds."""

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort


class OnnxPolicy:
    """An exported policy acting on batches as a Gymnasium vector env gives them."""

    def __init__(self, export_dir: str | Path, threads: int = 0) -> None:
        root = Path(export_dir)
        self.meta = json.loads((root / "policy.json").read_text())
        options = ort.SessionOptions()  # threads 0: onnxruntime's default
        options.intra_op_num_threads = threads
        path, cpu = str(root / self.meta["model_file"]), ["CPUExecutionProvider"]
        self.session = ort.InferenceSession(path, options, providers=cpu)
        self.outputs = [spec["name"] for spec in self.meta["outputs"]]

    def initial_state(self, n: int, target_return: float | None = None) -> dict:
        target = self.meta["default_target_return"] if target_return is None else target_return
        state = {}
        for spec in self.meta["inputs"]:
            if spec.get("role") == "state":
                fill = target if spec["initial"] == "target_return" else spec["initial"]
                shape = [n if d == "batch" else d for d in spec["shape"]]
                state[spec["name"]] = np.full(shape, fill, dtype=spec["dtype"])
        return state

    def act(
        self, obs: object, state: dict, episode_start: np.ndarray, reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None, deterministic: bool = True, rng: object = None,
    ) -> tuple[np.ndarray, dict]:  # fmt: skip
        n, rng = len(episode_start), rng or np.random.default_rng()
        sampling = self.meta["sampling"] or {}
        if not deterministic and not sampling:
            raise ValueError(f"cannot sample actions: {self.meta['sampling_problem']}")
        feed = dict(state)  # the state inputs, then the step's own
        for spec in self.meta["inputs"]:
            role, shape = spec.get("role"), [n if d == "batch" else d for d in spec["shape"]]
            if role == "observation":  # a leaf of nested dicts / tuples of batched arrays
                value = obs
                for key in spec["leaf"].split("/") if spec["leaf"] else []:
                    value = value[key] if isinstance(value, dict) else value[int(key)]
            elif role in ("episode_start", "reward"):
                value = episode_start if role == "episode_start" else reward
                value = np.zeros(shape) if value is None else value
            elif role == "noise":  # zeros: the most likely action; else the graph samples
                draw = {"gumbel": rng.gumbel, "logistic": rng.logistic}.get(
                    sampling["noise_kind"], rng.normal
                )
                value = np.zeros(shape) if deterministic else draw(size=shape)
            elif role == "action_mask":
                value = np.ones(shape) if action_mask is None else action_mask
            else:
                continue
            feed[spec["name"]] = np.asarray(value).astype(spec["dtype"]).reshape(shape)
        out = dict(zip(self.outputs, self.session.run(self.outputs, feed), strict=True))
        state = {name: out["next_" + name] for name in state}
        if deterministic or sampling["distribution"] == "noise_input":
            return out["action"], state
        sample, action = _sample(out, sampling, rng)
        if (name := sampling["model_action_state"]) is not None:  # the next previous action
            state[name] = sample.reshape(state[name].shape).astype(state[name].dtype)
        return action.reshape(n, *sampling["shape"]).astype(sampling["dtype"]), state


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
