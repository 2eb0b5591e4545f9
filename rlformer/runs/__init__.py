"""The run lifecycle: run directories, checkpoints, resume rules, signals, the algorithm protocol
and the loop that drives any algorithm through one run (:func:`rlformer.runs.training.train`)."""

from rlformer.moved_paths import moved_name as _moved_name


def __getattr__(name: str) -> object:
    return _moved_name(__name__, name)
