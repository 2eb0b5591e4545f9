"""Decision-Transformer window sampling: rlformer's vectorised gather vs per-sample Python loops.

Run:
    .venv/bin/python benchmarks/data.py                    # Hopper-sized synthetic data
    .venv/bin/python benchmarks/data.py --dataset d4rl:hopper-medium-v2.hdf5
    .venv/bin/python benchmarks/data.py --quick

All three samplers draw episodes with probability proportional to length, a uniform start step,
and build left-padded K-step windows of normalised states, actions, rewards, returns-to-go,
timesteps and masks as torch tensors — the same batch, in one process, on the same data:

* ``rlformer``: :class:`rlformer.data.sampling.WindowSampler` (episodes concatenated in flat
  arrays; one fancy-indexing gather per field for the whole batch).
* ``loop, rtg precomputed``: a Python loop over the B samples that slices each episode's own
  arrays and pads with ``np.concatenate`` — what one writes first, given precomputed
  returns-to-go.
* ``loop, rtg per sample``: the same loop, but summing the rewards from the sampled step to the
  episode end in a Python loop for every sample, as the original Decision Transformer training
  code does (its ``discount_cumsum``).

The default data mimic D4RL hopper-medium: 11-dim states, 3-dim actions, ~1M transitions in
episodes of 20-1000 steps. Prints windows per second (wall clock and CPU time of this
process) and the speed-up over each loop.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from rlformer.data import load_dataset
from rlformer.data.episodes import Dataset, Episode
from rlformer.data.sampling import WindowSampler, returns_to_go


def synthetic_dataset(transitions: int, obs_dim: int, act_dim: int, seed: int) -> Dataset:
    """Random episodes of 20-1000 steps until ``transitions`` steps are reached."""
    rng = np.random.default_rng(seed)
    episodes, total = [], 0
    while total < transitions:
        n = int(min(rng.integers(20, 1001), transitions - total))
        episodes.append(
            Episode(
                observations=rng.normal(size=(n, obs_dim)).astype(np.float32),
                actions=rng.uniform(-1, 1, size=(n, act_dim)).astype(np.float32),
                rewards=rng.normal(3.0, 1.0, size=n).astype(np.float32),
                terminated=True,
                truncated=False,
            )
        )
        total += n
    return Dataset(episodes, source=f"synthetic:{transitions}")


def _suffix_sums(rewards: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Returns-to-go of steps ``start..stop-1``, summed backwards from the episode end."""
    out = np.zeros(len(rewards) - start, dtype=np.float32)
    running = 0.0
    for t in range(len(rewards) - 1, start - 1, -1):
        running += float(rewards[t])
        out[t - start] = running
    return out[: stop - start]


class LoopSampler:
    """Per-sample Python loop over episode-wise arrays (the baseline being measured)."""

    def __init__(self, dataset: Dataset, context: int, rtg_per_sample: bool) -> None:
        self.k, self.rtg_per_sample = context, rtg_per_sample
        self.obs = [e.observations.reshape(len(e), -1).astype(np.float32) for e in dataset.episodes]
        self.actions = [e.actions.reshape(len(e), -1).astype(np.float32) for e in dataset.episodes]
        self.rewards = [e.rewards.astype(np.float32) for e in dataset.episodes]
        self.rtg = [returns_to_go(r).astype(np.float32) for r in self.rewards]
        all_obs = np.concatenate(self.obs)
        self.mean, self.std = all_obs.mean(0), all_obs.std(0) + 1e-6
        lengths = np.array([len(r) for r in self.rewards])
        self.p = lengths / lengths.sum()

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        """One batch, built sample by sample."""
        out: dict[str, list[np.ndarray]] = {k: [] for k in ("s", "a", "r", "rtg", "t", "m")}
        for episode in rng.choice(len(self.p), size=batch_size, p=self.p):
            n = len(self.rewards[episode])
            start = int(rng.integers(0, n))
            stop = min(start + self.k, n)
            if self.rtg_per_sample:
                rtg = _suffix_sums(self.rewards[episode], start, stop)
            else:
                rtg = self.rtg[episode][start:stop]
            pad = self.k - (stop - start)
            obs = (self.obs[episode][start:stop] - self.mean) / self.std
            out["s"].append(np.concatenate([np.zeros((pad, obs.shape[1])), obs]))
            act = self.actions[episode][start:stop]
            out["a"].append(np.concatenate([np.zeros((pad, act.shape[1])), act]))
            out["r"].append(np.concatenate([np.zeros(pad), self.rewards[episode][start:stop]]))
            out["rtg"].append(np.concatenate([np.zeros(pad), rtg]))
            out["t"].append(np.concatenate([np.zeros(pad, np.int64), np.arange(start, stop)]))
            out["m"].append(np.concatenate([np.zeros(pad, bool), np.ones(stop - start, bool)]))
        return {
            "states": torch.as_tensor(np.stack(out["s"]), dtype=torch.float32),
            "actions": torch.as_tensor(np.stack(out["a"]), dtype=torch.float32),
            "rewards": torch.as_tensor(np.stack(out["r"]), dtype=torch.float32),
            "returns_to_go": torch.as_tensor(np.stack(out["rtg"]), dtype=torch.float32)[..., None],
            "timesteps": torch.as_tensor(np.stack(out["t"])),
            "mask": torch.as_tensor(np.stack(out["m"])),
        }


@dataclass
class Rate:
    """Windows per wall-clock second and per CPU second of this process."""

    wall: float
    cpu: float


def measure(sample: Callable[[], object], batch: int, seconds: float) -> Rate:
    """Batches drawn for about ``seconds`` (after one warm-up batch).

    Everything here is single-threaded, so windows per CPU second is what an idle core would
    give even while other work shares the machine; wall-clock rates are printed beside it.
    """
    sample()
    count, start, start_cpu = 0, time.perf_counter(), time.process_time()
    while (elapsed := time.perf_counter() - start) < seconds:
        sample()
        count += 1
    return Rate(count * batch / elapsed, count * batch / (time.process_time() - start_cpu))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dataset", help="d4rl:PATH, minari:ID or a recording (default: synthetic)"
    )
    parser.add_argument("--transitions", type=int, default=1_000_000)
    parser.add_argument("--context", type=int, default=20, help="K, steps per window")
    parser.add_argument("--batch", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--seconds", type=float, default=3.0, help="timing per measurement")
    parser.add_argument("--quick", action="store_true", help="100k transitions, 1 s per row")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.quick:
        args.transitions, args.seconds = 100_000, 1.0

    started = time.perf_counter()
    dataset = (
        load_dataset(args.dataset)
        if args.dataset
        else synthetic_dataset(args.transitions, 11, 3, seed=0)
    )
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    sampler = WindowSampler(dataset, args.context)
    setup_s = time.perf_counter() - started
    loops = {
        "loop, rtg precomputed": LoopSampler(dataset, args.context, rtg_per_sample=False),
        "loop, rtg per sample": LoopSampler(dataset, args.context, rtg_per_sample=True),
    }
    print(
        f"data: {dataset.source}, {dataset.num_episodes} episodes, "
        f"{dataset.num_transitions} transitions (built/loaded in {load_s:.1f} s); "
        f"WindowSampler set-up {setup_s:.2f} s; K = {args.context}; torch threads 1\n"
    )
    print("| sampler | batch | windows/s | windows/CPU-s | rlformer speed-up (CPU) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    rng = np.random.default_rng(0)
    for batch in args.batch:
        ours = measure(lambda b=batch: sampler.sample(b, rng), batch, args.seconds)
        print(f"| rlformer WindowSampler | {batch} | {ours.wall:,.0f} | {ours.cpu:,.0f} | 1.0x |")
        for name, loop in loops.items():
            rate = measure(lambda b=batch, s=loop: s.sample(b, rng), batch, args.seconds)
            print(
                f"| {name} | {batch} | {rate.wall:,.0f} | {rate.cpu:,.0f} "
                f"| {ours.cpu / rate.cpu:.1f}x |"
            )


if __name__ == "__main__":
    main()
