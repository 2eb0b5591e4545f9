"""Ray backend: one actor per rollout worker, on this machine or across a Ray cluster.

Each actor is the same :class:`~rlformer.rollout.worker.RolloutWorker` the local backend runs
in-process, so for equal seeds and weights both backends return identical fragments.

Per iteration the learner's weights go into the object store once (``ray.put``) and every actor
receives the same reference. Fragments are tagged with the policy version; one of another
version is an error, never silently mixed in.

Failures: a worker that dies, or does not return its fragment within
``rollout.sample_timeout_s``, is killed and replaced by a fresh actor with the same index and
seed, and its fragment is collected again, so a batch is always complete. The replacement's
envs and memory restart from the worker's *first* episode (the dead actor's env state is lost),
so after a failure the run is no longer bit-identical to one without. Past
``rollout.max_worker_restarts`` replacements per collector the run stops with
:class:`RolloutError`. Actor start-up (imports, env and model construction, waiting for cluster
resources) is timed separately from sampling, so a short sample timeout does not punish it.

Asynchronous sampling (``rollout.async_sampling``): each :meth:`RayCollector.collect` returns
the batch the actors started at the previous call and starts the next one with the weights just
given, so the actors sample while the learner updates, one policy version behind it. On a
machine where one fragment costs about as long as one update this nearly halves an iteration;
the fragments still carry the version that produced them, and PPO trains on such a batch with
decoupled clipping (rlformer/algos/ppo/learner.py). A checkpoint waits for the batch in flight and
keeps it with the actors' states, so a resumed run continues exactly as an uninterrupted one.

Ray is imported only here, so the local backend works without it.
"""

from __future__ import annotations

import math
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import torch

from rlformer.config import TrainConfig
from rlformer.rollout.env_guard import EnvCrash, EnvDataError
from rlformer.rollout.worker_spec import (
    WorkerSpec,
    ppo_worker_spec,
    split_async_states,
    wrap_async_state,
)

# Start-up includes importing torch and gymnasium in a fresh process and, on a busy cluster,
# waiting for free CPUs; a generous floor keeps a small sample_timeout_s from killing it.
STARTUP_TIMEOUT_FLOOR_S = 120.0


class RolloutError(RuntimeError):
    """Collection cannot continue: too many worker failures, or a fragment of the wrong version."""


def _describe(err: BaseException) -> str:
    """What went wrong in one line: an env's own report, else the first line of Ray's error
    (the full text repeats the remote traceback)."""
    cause = _env_cause(err)
    if cause is not None:
        return str(cause)
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"


def _env_cause(err: BaseException) -> EnvCrash | EnvDataError | None:
    """The env failure behind a Ray error, if that is what it was."""
    seen = 0
    while err is not None and seen < 5:
        if isinstance(err, EnvCrash | EnvDataError):
            return err
        err = getattr(err, "cause", None) or err.__cause__
        seen += 1
    return None


CLUSTER_PROBE_TIMEOUT_S = 5.0


def check_cluster_reachable(address: str, timeout_s: float = CLUSTER_PROBE_TIMEOUT_S) -> None:
    """Fail fast when nothing listens at a ``host:port`` (or ``ray://host:port``) address.

    ``ray.init`` retries an unreachable GCS for minutes while logging only warnings, so a typo in
    ``rollout.ray_address`` would look like a hung run. A TCP connect is enough to tell "no
    cluster there" from "cluster there"; ``auto`` is left to Ray, which fails at once when it
    finds no cluster on this machine.

    Raises:
        RolloutError: Nothing accepted a connection at the address within ``timeout_s``.
    """
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if address == "auto" or not host or not port.isdigit():
        return
    try:  # "[::1]:6379": IPv6 hosts come bracketed
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as err:
        raise RolloutError(
            f"rollout.ray_address={address!r}: no Ray cluster answers at {host}:{port} ({err}). "
            f"Start one there first (`ray start --head --port={port}` on that machine), fix the "
            "address, or set rollout.ray_address: null to run on an embedded local Ray."
        ) from err


@dataclass
class _Batch:
    """One batch being sampled: the weights and version it was started with, and per pending
    object reference its worker index and deadline."""

    weights_ref: Any
    version: int
    pending: dict[Any, int]
    deadline: dict[Any, float]


class RayCollector:
    """``rollout.num_workers`` Ray actors, each stepping ``rollout.envs_per_worker`` envs.

    Example::

        collector = RayCollector(cfg)          # starts or joins Ray, waits for the actors
        batch = collector.collect(model.state_dict(), version=0)
        collector.close()                      # shuts Ray down only if we started it

    Attributes:
        restarts: Workers replaced so far (bounded by ``rollout.max_worker_restarts``).
        workers: The actor handles, indexed by worker index.
    """

    def __init__(self, cfg: TrainConfig, spec: WorkerSpec | None = None) -> None:
        import ray

        self._ray = ray
        self.cfg = cfg
        self.spec = spec or ppo_worker_spec(cfg)
        self._owns_ray = False
        if not ray.is_initialized():
            self._init_ray(cfg)
            self._owns_ray = True
        # One actor class for all workers; fractional CPUs let several share a core. Ray's own
        # actor restarts stay off: a restarted actor would silently lose its env state.
        self._actor_class = ray.remote(num_cpus=cfg.rollout.worker_cpus, max_restarts=0)(
            self.spec.cls
        )
        self.restarts = 0
        # Asynchronous sampling: the batch the actors are producing, or (after a checkpoint
        # waited for it, or a resume restored it) its fragments, ready to be returned.
        self._in_flight: _Batch | None = None
        self._ready: list[Any] | None = None
        self.workers: list[Any] = [self._spawn(i) for i in range(cfg.rollout.num_workers)]
        try:
            self._wait_ready(list(range(len(self.workers))))
        except (ray.exceptions.RayError, TimeoutError) as err:
            self.close()
            raise RolloutError(self._startup_failure(err)) from err

    # ------------------------------------------------------------ set-up
    def _init_ray(self, cfg: TrainConfig) -> None:
        """Start an embedded Ray (``ray_address: null``) or join a running cluster."""
        rollout = cfg.rollout
        # log_to_driver=False keeps worker chatter away from the training progress bar; worker
        # errors still arrive here as exceptions and the full logs stay in Ray's session dir.
        common: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
            "ignore_reinit_error": True,
        }
        if rollout.ray_runtime_env is not None:
            # How cluster workers get the user's env code when it is not installed on every
            # node: e.g. {working_dir: .} or {py_modules: [./mypkg]} (see docs/guides/own-env.md).
            common["runtime_env"] = rollout.ray_runtime_env
        if rollout.ray_address is None:
            needed = math.ceil(rollout.num_workers * rollout.worker_cpus)
            # address="local": always a fresh embedded Ray, never a cluster found on the machine.
            self._ray.init(address="local", num_cpus=max(needed, os.cpu_count() or 1), **common)
        else:
            common.pop("include_dashboard")  # a cluster's dashboard is the cluster's business
            check_cluster_reachable(rollout.ray_address)
            self._ray.init(address=rollout.ray_address, **common)

    def _spawn(self, index: int) -> Any:
        """A fresh actor for worker ``index`` (same seed, so same envs as the first one)."""
        return self._actor_class.remote(*self.spec.args, index, **self.spec.kwargs)

    def _startup_timeout(self) -> float:
        return max(STARTUP_TIMEOUT_FLOOR_S, self.cfg.rollout.sample_timeout_s)

    def _wait_ready(self, indices: list[int]) -> None:
        """Block until the constructors of ``indices`` ran (raises Ray's error if one failed)."""
        refs = [self.workers[i].process_id.remote() for i in indices]
        self._ray.get(refs, timeout=self._startup_timeout())

    def _startup_failure(self, err: BaseException) -> str:
        rollout = self.cfg.rollout
        if isinstance(err, TimeoutError):
            return (
                f"{rollout.num_workers} rollout workers with rollout.worker_cpus="
                f"{rollout.worker_cpus} did not start within {self._startup_timeout():.0f}s; "
                "does the Ray cluster have that many free CPUs? "
                f"(available: {self._ray.available_resources()})"
            )
        return f"a rollout worker failed to start: {_describe(err)}"

    # ------------------------------------------------------------ failures
    def _replace(self, index: int, reason: str) -> None:
        """Swap worker ``index`` for a fresh, started actor, within the restart budget."""
        budget = self.cfg.rollout.max_worker_restarts
        while True:
            self.restarts += 1
            if self.restarts > budget:
                raise RolloutError(
                    f"rollout worker {index} failed ({reason}) and the restart budget "
                    f"rollout.max_worker_restarts={budget} is used up; check the workers' logs "
                    "(`ray logs`, or the session directory under /tmp/ray) or raise the budget"
                )
            # no_restart: the handle is dead to us even if the process only hangs.
            self._ray.kill(self.workers[index], no_restart=True)
            self.workers[index] = self._spawn(index)
            try:
                self._wait_ready([index])
                return
            except (self._ray.exceptions.RayError, TimeoutError) as err:
                reason = f"its replacement failed to start: {_describe(err)}"

    # ------------------------------------------------------------ collection
    def collect(self, weights: dict[str, torch.Tensor], version: int) -> Any:
        """One complete fragment from every worker, all produced by one policy version.

        Synchronous (the default): by ``version``, sampled now. With
        ``rollout.async_sampling``: the batch started at the previous call (by the version given
        then; the first call samples with ``version`` and waits), while the next batch starts
        sampling with these weights.

        Args:
            weights: The learner's ``state_dict`` (moved to CPU here, put in the store once).
            version: Policy version to tag the fragments with; checked on every fragment.

        Returns:
            The workers' fragments merged along the env axis, in worker order.

        Raises:
            RolloutError: Restart budget exhausted, or a fragment of another version came back.
        """
        weights_ref = self._ray.put({k: v.detach().cpu() for k, v in weights.items()})
        if not self.cfg.rollout.async_sampling:
            fragments = self._gather(self._start(weights_ref, version))
        else:
            if self._ready is None and self._in_flight is None:
                self._in_flight = self._start(weights_ref, version)
            fragments = self._take_ready()
            self._in_flight = self._start(weights_ref, version)
        return type(fragments[0]).concat(fragments)

    def _take_ready(self) -> list[Any]:
        """The fragments of the batch in flight (waiting for them if need be)."""
        if self._ready is None:
            assert self._in_flight is not None
            self._ready = self._gather(self._in_flight)
            self._in_flight = None
        fragments, self._ready = self._ready, None
        return fragments

    def _start(self, weights_ref: Any, version: int) -> _Batch:
        """Queue ``set_weights`` and ``sample`` on every actor."""
        batch = _Batch(weights_ref, version, {}, {})
        for index in range(len(self.workers)):
            self._submit(batch, index)
        return batch

    def _submit(self, batch: _Batch, index: int) -> None:
        """Queue ``set_weights`` then ``sample`` on one actor (actor calls run in order)."""
        worker = self.workers[index]
        worker.set_weights.remote(batch.weights_ref, batch.version)
        ref = worker.sample.remote()
        batch.pending[ref] = index
        batch.deadline[ref] = time.monotonic() + self.cfg.rollout.sample_timeout_s

    def _gather(self, batch: _Batch) -> list[Any]:
        """Wait for every fragment of ``batch``, replacing workers that die or hang and
        sampling their fragment again; returns them in worker order."""
        ray = self._ray
        timeout = self.cfg.rollout.sample_timeout_s
        # Lost workers: dead actor, crashed process, dead node, or an object lost with its node.
        lost = (
            ray.exceptions.RayActorError,
            ray.exceptions.WorkerCrashedError,
            ray.exceptions.NodeDiedError,
            ray.exceptions.ObjectLostError,
            ray.exceptions.GetTimeoutError,
        )
        pending, deadline = batch.pending, batch.deadline
        fragments: dict[int, Any] = {}
        while pending:
            wait_s = max(0.0, min(deadline.values()) - time.monotonic())
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=wait_s)
            for ref in ready:
                index = pending.pop(ref)
                del deadline[ref]
                try:
                    fragments[index] = ray.get(ref, timeout=timeout)
                except lost as err:
                    self._replace(index, _describe(err))
                    self._submit(batch, index)
                except ray.exceptions.RayTaskError as err:
                    cause = _env_cause(err)
                    if isinstance(cause, EnvDataError):
                        raise cause from None  # bad data is not a crash: no retry
                    if cause is None:
                        raise RolloutError(
                            f"rollout worker {index} failed: {_describe(err)}"
                        ) from err
                    # An env that raised may be flaky; a deterministic bug uses up the budget.
                    self._replace(index, str(cause))
                    self._submit(batch, index)
            now = time.monotonic()
            for ref in [r for r, limit in deadline.items() if limit <= now]:
                index = pending.pop(ref)
                del deadline[ref]
                self._replace(index, f"no fragment within rollout.sample_timeout_s={timeout}s")
                self._submit(batch, index)
        ordered = [fragments[i] for i in range(len(self.workers))]
        stale = {
            f.worker_index: f.policy_version for f in ordered if f.policy_version != batch.version
        }
        if stale:
            raise RolloutError(
                f"expected fragments of policy version {batch.version}, got {stale} "
                "(worker: version)"
            )
        return ordered

    # ------------------------------------------------------------ per-worker calls
    def _call_all(self, method: str, *args_per_worker: list[Any]) -> list[Any]:
        """Call ``method`` on every actor (i-th args to worker i) and gather the results."""
        refs = [
            getattr(worker, method).remote(*(args[i] for args in args_per_worker))
            for i, worker in enumerate(self.workers)
        ]
        try:
            return self._ray.get(refs, timeout=self.cfg.rollout.sample_timeout_s)
        except (self._ray.exceptions.RayActorError, TimeoutError) as err:
            raise RolloutError(f"{method} on the rollout workers failed: {_describe(err)}") from err

    def get_state(self) -> list[dict[str, Any]]:
        """Each worker's env / memory / RNG state, for a checkpoint (see RolloutWorker).

        A worker that died since its last fragment is replaced first, within the restart
        budget, exactly as :meth:`collect` would; its state is then its replacement's fresh one.
        With asynchronous sampling the batch in flight is waited for and each worker's fragment
        of it travels with that worker's state (see :func:`wrap_async_state`).
        """
        pending = None
        if self._in_flight is not None or self._ready is not None:
            pending = self._take_ready()
            self._ready = pending  # still the next batch to return
        states = self._worker_states()
        if pending is None:
            return states
        return [
            {**state, "state": wrap_async_state(state["state"], fragment)}
            for state, fragment in zip(states, pending, strict=True)
        ]

    def _worker_states(self) -> list[dict[str, Any]]:
        lost = (self._ray.exceptions.RayActorError, self._ray.exceptions.GetTimeoutError)
        refs = [worker.get_state.remote() for worker in self.workers]
        states = []
        for index, ref in enumerate(refs):
            while True:  # ends: a state, or RolloutError once the restart budget is spent
                try:
                    states.append(self._ray.get(ref, timeout=self.cfg.rollout.sample_timeout_s))
                    break
                except lost as err:
                    self._replace(index, _describe(err))
                    ref = self.workers[index].get_state.remote()
        return states

    def set_state(self, states: list[dict[str, Any]]) -> None:
        """Restore the states of :meth:`get_state` (from either backend) into the actors."""
        if len(states) != len(self.workers):
            raise RolloutError(
                f"checkpoint holds {len(states)} worker states, rollout.num_workers is "
                f"{len(self.workers)}; resume with the same rollout settings"
            )
        unwrapped, fragments = split_async_states(states)
        self._call_all("set_state", unwrapped)
        self._in_flight = None
        self._ready = fragments if self.cfg.rollout.async_sampling else None

    def process_ids(self) -> list[int]:
        """PIDs of the actor processes (tests kill them to simulate a crash)."""
        return self._call_all("process_id")

    def node_ids(self) -> list[str]:
        """Ray node id each worker runs on (shows placement across a cluster)."""
        return self._call_all("node_id")

    def close(self) -> None:
        """Kill the actors and disconnect from Ray if this collector connected.

        An embedded Ray stops with it; a joined cluster (``ray_address`` set) keeps running, only
        this driver leaves. A Ray that was already initialised by the caller is left alone.
        """
        for worker in self.workers:
            self._ray.kill(worker, no_restart=True)
        self.workers = []
        if self._owns_ray:
            self._ray.shutdown()
            self._owns_ray = False
