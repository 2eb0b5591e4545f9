"""The policies' error, kept apart from torch so that the command line can name it without
loading it (:mod:`rlformer.cli.errors`)."""


class PolicyError(ValueError):
    """A policy that cannot be loaded or used as asked (a missing or foreign model file, noise
    on an action space it does not fit), with what to do about it."""
