"""The process group of data-parallel learners, and the sums they exchange.

Why Ray actors with ``torch.distributed`` rather than Ray Train: Ray Train's ``TorchTrainer``
owns the training loop (it calls one function per worker and drives it to the end), its own
checkpoints and its own failure handling. rlformer's learners are one step of the run loop
(:mod:`rlformer.runs.loop`), which owns checkpoints, resume, evaluation and the minibatch RNG;
the driver must call the replicas minibatch by minibatch and stop them cleanly on a failure.
Plain actors give that control; ``torch.distributed`` gives the all-reduce (gloo on CPU, NCCL
on CUDA, picked by the learners' device), with every collective bounded by the group's timeout.

A :class:`Reducer` is what a learner sums through: :data:`LOCAL` for one process (a sum over
one member is the value itself), :class:`GroupReducer` across the group.
"""

from __future__ import annotations

import datetime
import socket
from collections.abc import Iterable
from typing import Protocol

import torch
import torch.distributed as dist
from torch import nn


def backend_for(device: torch.device) -> str:
    """NCCL between GPUs, gloo between CPU processes."""
    return "nccl" if device.type == "cuda" else "gloo"


def free_port() -> int:
    """A TCP port nothing listens on now, for the group's rendezvous store."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def join_group(
    host: str, port: int, rank: int, world_size: int, device: torch.device, timeout_s: float
) -> None:
    """Join the process group whose rank 0 listens at ``host:port``; every later collective
    fails after ``timeout_s`` instead of waiting forever for a lost member."""
    dist.init_process_group(
        backend_for(device),
        init_method=f"tcp://{host}:{port}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )


class Reducer(Protocol):
    """Element-wise reductions over the members of a learner group (in place)."""

    size: int

    def sum(self, tensor: torch.Tensor) -> torch.Tensor: ...

    def max(self, tensor: torch.Tensor) -> torch.Tensor: ...


class LocalReducer:
    """One learner: every reduction is the identity."""

    size = 1

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def max(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor


LOCAL = LocalReducer()


class GroupReducer:
    """All-reduce over the default process group (:func:`join_group` first)."""

    def __init__(self) -> None:
        self.size = dist.get_world_size()

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def max(self, tensor: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return tensor


def reduce_gradients(parameters: Iterable[nn.Parameter], reducer: Reducer) -> None:
    """Sum every parameter's gradient over the group, in one all-reduce.

    A parameter without a gradient here counts as zero in the sum; it keeps none only if no
    member had one, so every replica's optimiser steps the same parameters.
    """
    if reducer.size == 1:
        return
    params = list(parameters)
    present = [p.grad is not None for p in params]
    parts = [p.grad.reshape(-1) if p.grad is not None else p.new_zeros(p.numel()) for p in params]
    flags = torch.tensor(present, dtype=torch.float32, device=parts[0].device)
    flat = torch.cat([*[part.float() for part in parts], flags])
    reducer.sum(flat)
    offset = 0
    had = flat[-len(params) :].cpu()
    for index, param in enumerate(params):
        size = param.numel()
        grad = flat[offset : offset + size].view_as(param).to(param.dtype)
        param.grad = grad if bool(had[index] > 0) else None
        offset += size
