"""Online Decision Transformer: a Decision Transformer fine-tuned on its own rollouts."""

from rlformer.moved_paths import moved_name as _moved_name


def __getattr__(name: str) -> object:
    return _moved_name(__name__, name)
