"""``rlformer collect``: record an offline dataset from a policy on the env it names or is given."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rlformer.cli.errors import fail, user_errors
from rlformer.cli.options import TrustCheckpoint


def collect(
    policy: Annotated[
        str, typer.Option(help="random | RUN_DIR (an rlformer run or checkpoint) | sb3:PATH.zip")
    ] = "random",
    env: Annotated[
        str | None,
        typer.Option(
            help="Gymnasium env id (default: an rlformer policy's training env with its "
            "imports and wrappers, else CartPole-v1)."
        ),
    ] = None,
    steps: Annotated[int, typer.Option(min=1, help="Transitions to record.")] = 10_000,
    out: Annotated[Path, typer.Option(help="Output HDF5 file (D4RL layout).")] = Path(
        "dataset.hdf5"
    ),
    seed: Annotated[int, typer.Option(min=0, help="Seed for envs and action noise.")] = 0,
    num_envs: Annotated[int, typer.Option(min=1, help="Vector envs stepped together.")] = 8,
    noise: Annotated[
        float,
        typer.Option(min=0.0, help="Gaussian action noise (x half the action range) or epsilon."),
    ] = 0.0,
    random_fraction: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of steps with a uniformly random action.")
    ] = 0.0,
    stochastic: Annotated[
        bool,
        typer.Option(
            "--stochastic", help="Sample a trained policy's actions instead of taking the mode."
        ),
    ] = False,
    trust_checkpoint: TrustCheckpoint = False,
    config: Annotated[
        Path | None,
        typer.Option(
            help="Run config whose env section builds the env (imports, wrappers, kwargs), as a "
            "DT trained with that config builds it; --env replaces its id."
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="KEY=VALUE for that env, e.g. env.id=MiniGrid-MemoryS11-v0, preset=minigrid "
            "(repeatable).",
        ),
    ] = None,
) -> None:
    """Record an offline dataset from a policy, in the D4RL HDF5 layout with metadata.

    --noise and --random-fraction turn one trained policy into medium- or replay-like data.
    --config / --set build envs that need imports or wrappers (POPGym, MiniGrid, your own);
    train the DT with the same settings so that the data fits its env.
    """
    from rlformer.data.inspect import format_summary, summarize_dataset
    from rlformer.data.recorder import collect_dataset

    try:
        env_cfg, env_id, kwargs = _collect_env(policy, env, config, set_, trust_checkpoint)
        dataset = collect_dataset(
            policy,
            env_id,
            steps,
            out,
            seed=seed,
            num_envs=num_envs,
            noise=noise,
            random_fraction=random_fraction,
            deterministic=not stochastic,
            env_kwargs=kwargs,
            env_cfg=env_cfg,
            trust=trust_checkpoint,
        )
    except user_errors() as err:
        fail(str(err))
    typer.echo(f"wrote {out}")
    typer.echo(format_summary(summarize_dataset(dataset)))


def _collect_env(
    policy: str, env: str | None, config: Path | None, set_: list[str] | None, trust: bool
):  # noqa: ANN202 - (EnvConfig | None, env id, kwargs | None)
    """The env ``rlformer collect`` records on: its config (imports, wrappers), id and
    ``gymnasium.make`` kwargs, from a trained policy's training env or from --config/--set,
    with --env replacing the id."""
    from rlformer.config import offline_env_config

    env_cfg = _policy_env(policy, trust)
    if config is not None or set_:
        if env_cfg is not None:
            fail(
                "--config and --set describe the env, but a trained rlformer policy brings "
                "its own training env: give one or the other"
            )
        env_cfg = offline_env_config(config, set_)
    env_id = env or (env_cfg.id if env_cfg is not None else "CartPole-v1")
    # A policy's training env keeps its kwargs only for its own id; --set ones always hold.
    keep_kwargs = env_cfg is not None and (env is None or config is not None or bool(set_))
    return env_cfg, env_id, env_cfg.kwargs if keep_kwargs else None


def _policy_env(policy: str, trust: bool):  # noqa: ANN202 - EnvConfig | None
    """The env config an rlformer policy was trained with (imports, wrappers), else None."""
    if policy == "random" or policy.startswith("sb3:"):
        return None
    if (Path(policy) / "policy.json").is_file():  # an export directory says its training env
        from rlformer.policies import load_policy

        return load_policy(policy, trust).info.training_env
    from rlformer.runs.checkpoints import checkpoint_config, load_checkpoint, refuse_saved_calls

    env_cfg = checkpoint_config(load_checkpoint(policy, trust), policy).env
    refuse_saved_calls(env_cfg, policy, trust)
    return env_cfg
