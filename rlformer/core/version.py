"""The package's version (``rlformer.__version__``), kept below every layer that records it in
what it writes (datasets, exports), so that none of them imports the top package."""

VERSION = "0.3.0"
"""The release; pyproject.toml's ``version`` says the same."""
