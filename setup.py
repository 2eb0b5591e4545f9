"""Package discovery only; all metadata lives in pyproject.toml.

`envs/` (our Gymnasium tasks) is installed as the import package `rlformer_envs`, and
`configs/` (the runnable YAML configs, found by name: `rlformer train quickstart`) as
`rlformer_configs`, next to the auto-discovered `rlformer.*` packages.
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["rlformer", "rlformer.*"])
    + ["rlformer_envs", "rlformer_configs"],
    package_dir={"rlformer_envs": "envs", "rlformer_configs": "configs"},
    package_data={"rlformer_configs": ["*.yaml", "*/*.yaml"]},
)
