"""A group of learner processes on Ray: started together, called together, stopped together.

Each member is a Ray actor (a subclass of :class:`GroupMember`) that joins one
``torch.distributed`` process group with the others (:mod:`rlformer.learners.process_group` says
why this and not Ray Train). The driver calls a method on every member and waits for all the
answers, at most ``learner.timeout_s``. Members hold replicas that must stay identical, so a
lost or failing member cannot be replaced mid-run: the group kills every member (one blocked
in a collective with the lost one included) and raises :class:`LearnerError`, one line that
names the member; the run stops with its last checkpoint, which a resume with any
``learner.num_learners`` continues.

Ray is imported only when a group starts.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import torch

from rlformer.learners.nonfinite import NonFiniteError
from rlformer.learners.process_group import free_port, join_group

# Starting a member imports torch in a fresh process and may wait for free CPUs or GPUs.
STARTUP_TIMEOUT_FLOOR_S = 120.0
# How long a member's failure waits for Ray to report another member lost (the likelier cause).
LOST_GRACE_S = 10.0


class LearnerError(RuntimeError):
    """A learner process died, failed or did not answer in time; the group is stopped."""


class GroupMember:
    """Base of the actor classes of a group: rank, rendezvous and process-group membership."""

    def __init__(self, rank: int, device: str, threads: int) -> None:
        torch.set_num_threads(threads)
        self.rank = rank
        self.device = torch.device(device)

    def rendezvous(self) -> tuple[str, int]:
        """Where this member (rank 0) will host the group's store."""
        import ray

        return ray.util.get_node_ip_address(), free_port()

    def join(self, host: str, port: int, world_size: int, timeout_s: float) -> None:
        join_group(host, port, self.rank, world_size, self.device, timeout_s)

    def process_id(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        """The Ray node this member runs on (shows placement across a cluster)."""
        import ray

        return str(ray.get_runtime_context().get_node_id())


def ray_init_options(cfg: Any) -> dict[str, Any]:
    """``ray.init`` arguments for a run whose learners start Ray (before any rollout worker):
    rollout.ray_address and ray_runtime_env as the rollout workers read them, and an embedded
    Ray with CPUs for the learners and the rollout workers together."""
    from rlformer.rollout.ray_collector import check_cluster_reachable

    rollout, learner = cfg.rollout, cfg.learner
    options: dict[str, Any] = {
        "log_to_driver": False,
        "configure_logging": False,
        "ignore_reinit_error": True,
    }
    if rollout.ray_runtime_env is not None:
        options["runtime_env"] = rollout.ray_runtime_env
    if rollout.ray_address is not None:
        check_cluster_reachable(rollout.ray_address)
        return options | {"address": rollout.ray_address}
    unmet = _unmet_on_this_machine(learner)
    if unmet is not None:
        raise LearnerError(
            f"{unmet}, and without rollout.ray_address the learners start an embedded Ray on "
            "this machine: join a cluster that offers it (rollout.ray_address)"
        )
    workers = rollout.num_workers * rollout.worker_cpus if rollout.backend == "ray" else 0.0
    needed = math.ceil(workers + learner.num_learners * learner.cpus_per_learner)
    return options | {
        "address": "local",
        "num_cpus": max(needed, os.cpu_count() or 1),
        "include_dashboard": False,
    }


def _unmet_on_this_machine(learner: Any) -> str | None:
    """What an embedded Ray here could never give the learner actors (they would wait for
    it until the start-up timeout), or None."""
    if learner.resources:
        return f"learner.resources={dict(learner.resources)} asks for custom Ray resources"
    if learner.device == "cuda" and not torch.cuda.is_available():
        return "learner.device=cuda asks for GPUs, and this machine has no CUDA GPU"
    return None


def learner_device(cfg: Any, driver_device: torch.device) -> torch.device:
    """Where the learner actors compute: ``learner.device`` when set (checked on the actors'
    nodes, not here, so a driver without a GPU can run CUDA learners), else the driver's
    ``run.device``."""
    device = cfg.learner.device
    return driver_device if device is None else torch.device(device)


def learner_placement(learner: Any, device: torch.device) -> dict[str, Any]:
    """What each learner actor reserves in Ray (:class:`LearnerGroup`'s ``cpus``, ``gpus``
    and ``resources``): ``learner.cpus_per_learner`` CPUs, one GPU when it computes on CUDA
    (rollout workers reserve none, so they stay on CPU-only nodes), and ``learner.resources``,
    which places the actors on the nodes that offer them."""
    return {
        "cpus": learner.cpus_per_learner,
        "gpus": 1 if device.type == "cuda" else 0,
        "resources": dict(learner.resources),
    }


def actor_options(cpus: float, gpus: float, resources: dict[str, float] | None) -> dict[str, Any]:
    """``ray.remote`` options of a learner actor. Ray never restarts one: a fresh replica
    would hold other weights than the survivors."""
    options: dict[str, Any] = {"num_cpus": cpus, "num_gpus": gpus, "max_restarts": 0}
    if resources:
        options["resources"] = dict(resources)
    return options


def to_cpu(value: Any) -> Any:
    """A copy of a (nested) state dict with every tensor on the CPU, for the driver."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {key: to_cpu(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(to_cpu(item) for item in value)
    return value


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"


class LearnerGroup:
    """``size`` actors of ``actor_class``, built as ``actor_class(*args, rank, device,
    threads)``, in one process group.

    Example::

        group = LearnerGroup(PPOReplica, (model, cfg), size=2, cpus=1.0, gpus=0,
                             timeout_s=300, device="cpu", threads=1)
        metrics = group.call("step", [(rows_0,), (rows_1,)])   # one answer per member
        group.close()
    """

    def __init__(
        self,
        actor_class: type[GroupMember],
        args: tuple[Any, ...],
        size: int,
        cpus: float,
        gpus: float,
        timeout_s: float,
        device: str = "cpu",
        threads: int = 1,
        ray_init: dict[str, Any] | None = None,
        resources: dict[str, float] | None = None,
    ) -> None:
        import ray

        self._ray = ray
        self.size = size
        self.timeout_s = timeout_s
        self._owns_ray = False
        if not ray.is_initialized():
            ray.init(**(ray_init or {"address": "local", "num_cpus": math.ceil(size * cpus)}))
            self._owns_ray = True
        remote = ray.remote(**actor_options(cpus, gpus, resources))(actor_class)
        self.actors = [remote.remote(*args, rank, device, threads) for rank in range(size)]
        startup = max(STARTUP_TIMEOUT_FLOOR_S, timeout_s)
        try:
            # Every member is up before any joins: the join waits for the others at most
            # ``timeout_s``, which may be shorter than one member's start on a busy machine.
            self._gather([actor.process_id.remote() for actor in self.actors], "start", startup)
            (host, port), *_ = self._gather([self.actors[0].rendezvous.remote()], "start", startup)
            self.call("join", [(host, port, size, timeout_s)] * size, startup)
        except LearnerError as err:
            self.close()
            need = f"{cpus:g} CPUs" + (f", {gpus:g} GPUs" if gpus else "")
            need += "".join(f", {amount:g} {name}" for name, amount in (resources or {}).items())
            raise LearnerError(f"{err} (each learner needs {need} free in Ray)") from None

    def put(self, value: Any) -> Any:
        """``value`` in the object store once, for every member to read."""
        return self._ray.put(value)

    def call(
        self,
        method: str,
        args: list[tuple[Any, ...]] | tuple[Any, ...] = (),
        timeout_s: float | None = None,
    ) -> list[Any]:
        """``method`` on every member (``args``: one tuple each, or one tuple for all); their
        answers in rank order.

        Raises:
            NonFiniteError: A member found a NaN (they all do, on the same summed values).
            LearnerError: A member died, raised anything else, or did not answer in time.
        """
        per_member = args if isinstance(args, list) else [args] * self.size
        calls = zip(self.actors, per_member, strict=True)
        refs = [getattr(actor, method).remote(*a) for actor, a in calls]
        return self._gather(refs, method, timeout_s or self.timeout_s)

    def _gather(self, refs: list[Any], method: str, timeout_s: float) -> list[Any]:
        """The answers of ``refs`` (one per member, in rank order), failing on the first
        member lost, failed or late."""
        ray = self._ray
        pending = {ref: rank for rank, ref in enumerate(refs)}
        answers: dict[int, Any] = {}
        deadline = time.monotonic() + timeout_s
        while pending:
            ready, _ = ray.wait(
                list(pending), num_returns=1, timeout=max(0.0, deadline - time.monotonic())
            )
            if not ready:
                late = sorted(pending.values())
                self._fail(
                    f"learner {late[0]} of {self.size} did not finish {method} within "
                    f"learner.timeout_s={timeout_s:g}s"
                )
            for ref in ready:
                rank = pending.pop(ref)
                try:
                    answers[rank] = ray.get(ref, timeout=timeout_s)
                except ray.exceptions.RayTaskError as err:
                    self._raised(rank, err, method, pending)
                except ray.exceptions.RayError as err:  # died: killed, crashed, node lost
                    self._fail(self._lost_line(rank, method, err))
        return [answers[rank] for rank in range(len(refs))]

    def _raised(self, rank: int, err: Any, method: str, pending: dict[Any, int]) -> None:
        """Member ``rank`` raised ``err``: stop the group with the cause.

        A collective fails on every member when one of them dies, often before Ray reports the
        death, so a member lost meanwhile is named instead of the one that saw it fail.
        """
        ray = self._ray
        ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=LOST_GRACE_S)
        for ref in ready:
            try:
                ray.get(ref, timeout=0)
            except ray.exceptions.RayTaskError:
                continue
            except ray.exceptions.RayError as lost:
                self._fail(self._lost_line(pending[ref], method, lost))
        if isinstance(err.cause, NonFiniteError):  # every member found the same NaN
            self.close()
            raise err.cause from None
        self._fail(
            f"learner {rank} of {self.size} failed in {method}: {_first_line(err.cause or err)}"
        )

    def _lost_line(self, rank: int, method: str, err: BaseException) -> str:
        return f"learner {rank} of {self.size} was lost during {method} ({_first_line(err)})"

    def _fail(self, message: str) -> None:
        """Stop every member (a survivor may wait in a collective) and raise ``message``."""
        self.close()
        raise LearnerError(
            f"{message}; the learners hold one model together, so the run stops with them"
        )

    def process_ids(self) -> list[int]:
        """PIDs of the members (tests kill one to simulate a crash)."""
        return self.call("process_id")

    def node_ids(self) -> list[str]:
        """The Ray node of each member, in rank order."""
        return self.call("node_id")

    def close(self) -> None:
        """Kill the members; shut Ray down if the group started it."""
        for actor in self.actors:
            self._ray.kill(actor, no_restart=True)
        self.actors = []
        if self._owns_ray:
            self._ray.shutdown()
            self._owns_ray = False
