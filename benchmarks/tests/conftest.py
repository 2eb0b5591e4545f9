"""The benchmark scripts' tests run under the library tests' settings: one torch thread and a
temporary config home (``tests/conftest.py``), also when this folder is run on its own."""

import tests.conftest  # noqa: F401
