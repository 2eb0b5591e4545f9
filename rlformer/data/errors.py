"""The one error type for unusable datasets: it names the file and the problem."""


class DatasetError(ValueError):
    """A dataset that is missing or malformed, with what to do about it."""
