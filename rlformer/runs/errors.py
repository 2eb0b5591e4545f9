"""What a run reports as a problem the user can act on, kept apart from torch so that the
command line can name these exceptions without loading it (:mod:`rlformer.cli.errors`)."""


class CheckpointError(RuntimeError):
    """A checkpoint or run directory that cannot be used, with what to do about it."""


class UnsafeCheckpointError(CheckpointError):
    """Reading the file would need unpickling, which can run code; refused unless trusted."""


class RunFailed(RuntimeError):
    """Training stopped on a problem found while running (NaN, env failure, full disk)."""
