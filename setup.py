"""Package discovery only; all metadata lives in pyproject.toml.

`envs/` (our Gymnasium tasks) is installed as the import package `rlformer_envs`, next to the
auto-discovered `rlformer.*` packages.
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["rlformer", "rlformer.*"]) + ["rlformer_envs"],
    package_dir={"rlformer_envs": "envs"},
)
