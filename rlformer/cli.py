"""``rlformer`` command line: wiring only — each command calls one library function.

Errors the user can fix (bad config, unknown env id, missing or incompatible checkpoint, bad
dataset) are printed as ``error: ...`` lines and exit with status 2, without a traceback.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from typer.core import TyperGroup

if TYPE_CHECKING:
    from rlformer.evaluation.report import EvaluationReport
    from rlformer.policies import Policy


class _SweepGroup(TyperGroup):
    """``rlformer sweep FILE`` means ``rlformer sweep run FILE``; ``report`` stays a command."""

    def parse_args(self, ctx, args):  # noqa: ANN001, ANN201 - click's signature
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    name="rlformer",
    help="Reinforcement-learning agents with Transformer memory (GTrXL-PPO, Decision Transformer).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
dataset_app = typer.Typer(help="Inspect offline datasets.", no_args_is_help=True)
app.add_typer(dataset_app, name="dataset")
sweep_app = typer.Typer(
    cls=_SweepGroup,
    help="Seeds x variants x tasks as Ray Tune trials: `rlformer sweep FILE` runs (or resumes) "
    "a sweep, `rlformer sweep report DIR` summarises one.",
    no_args_is_help=True,
)
app.add_typer(sweep_app, name="sweep")

USER_ERROR_EXIT = 2
RUN_FAILED_EXIT = 1

TRUST_HELP = (
    "Also load checkpoints that need unpickling (written by an older rlformer, or env states "
    "from another user or machine). Unpickling can run code: only for files you trust."
)
# Flags take one form (no --no- twin): the default is always off, and a twin column would
# squeeze every command's help.
TrustCheckpoint = Annotated[bool, typer.Option("--trust-checkpoint", help=TRUST_HELP)]
RayAddress = Annotated[
    str | None,
    typer.Option(help="Join a running Ray cluster ('auto' or host:port); default: embedded."),
]
DryRunTrials = Annotated[
    bool, typer.Option("--dry-run", help="Validate the file and list the trials, then stop.")
]


def fail(message: str, code: int = USER_ERROR_EXIT) -> NoReturn:
    """Print ``error: message`` (each line) to stderr and exit with ``code`` (2: bad input)."""
    for line in str(message).splitlines() or [""]:
        typer.echo(f"error: {line}", err=True)
    raise typer.Exit(code)


def _user_errors() -> tuple[type[Exception], ...]:
    from rlformer.config import ConfigError
    from rlformer.data.errors import DatasetError
    from rlformer.extras import MissingExtra
    from rlformer.policies.base import PolicyError
    from rlformer.rollout.env_factory import EnvError
    from rlformer.rollout.env_guard import EnvCrash, EnvDataError
    from rlformer.runs.checkpoints import CheckpointError

    return (
        ConfigError,
        MissingExtra,
        EnvError,
        CheckpointError,
        DatasetError,
        PolicyError,
        EnvCrash,
        EnvDataError,
    )


@app.command()
def train(
    config: Annotated[
        Path | None,
        typer.Argument(
            help="YAML config (see configs/); omitted: all defaults. Not with --resume."
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set", help="Override a config field: --set ppo.learning_rate=1e-3 (repeatable)."
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(help="Continue this run directory from its newest readable checkpoint."),
    ] = None,
    trust_checkpoint: TrustCheckpoint = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Check the config, the env, the model and the run folder, then stop (no run).",
        ),
    ] = False,
) -> None:
    """Train an agent from a YAML config; writes a run directory with metrics and checkpoints.

    SIGINT (Ctrl-C) or SIGTERM finishes the current iteration, writes a checkpoint and exits
    (130 / 143) saying how to resume; a second signal stops at once.
    """
    from rlformer.config import load_config
    from rlformer.runs.signals import Interrupted
    from rlformer.runs.training import RunFailed, check_config
    from rlformer.runs.training import resume as resume_run
    from rlformer.runs.training import train as train_run

    if config is not None and resume is not None:
        fail("give either CONFIG (a new run) or --resume RUN_DIR (continue a run), not both")
    try:
        if dry_run and resume is not None:
            fail("--dry-run checks a new run's config; it does not combine with --resume")
        if resume is not None:
            result = resume_run(resume, set_ or [], trust=trust_checkpoint)
        else:
            cfg = load_config(config, set_ or [])
            if cfg.preset is not None:
                typer.echo(
                    f"preset {cfg.preset}: its settings under the config's own "
                    "(rlformer/config/presets.py; preset: null for none)"
                )
            if dry_run:
                typer.echo(check_config(cfg))
                return
            result = train_run(cfg)
    except _user_errors() as err:
        fail(str(err))
    except RunFailed as err:
        fail(str(err), RUN_FAILED_EXIT)
    except Interrupted as err:
        typer.echo(f"interrupted: {err}", err=True)
        raise typer.Exit(err.exit_code) from None
    typer.echo(f"run directory: {result.run_dir}")
    if result.evaluation is not None:
        typer.echo(json.dumps(result.evaluation))


@app.command("eval")
def evaluate(
    agents: Annotated[
        list[str],
        typer.Argument(
            help="Run directories, checkpoint files, `rlformer export` directories or "
            "sb3:PATH.zip models (several: one table)."
        ),
    ],
    env: Annotated[
        str | None, typer.Option(help="Env id to evaluate on (default: each agent's training env).")
    ] = None,
    suite: Annotated[
        Path | None,
        typer.Option(help="Evaluate on every task of a suite file (configs/eval/*.yaml)."),
    ] = None,
    episodes: Annotated[
        int | None, typer.Option(min=1, help="Episodes per seed (default 20, or the suite's).")
    ] = None,
    seeds: Annotated[
        int | None,
        typer.Option(
            min=1, help="Independent seeds; seed s seeds env slot i with 1000*s+i (default 1)."
        ),
    ] = None,
    num_envs: Annotated[int, typer.Option(min=1, help="Vector envs stepped together.")] = 8,
    stochastic: Annotated[
        bool,
        typer.Option(
            "--stochastic",
            help="Sample actions instead of the mode (Decision Transformers: online DTs and "
            "discrete-action DTs).",
        ),
    ] = False,
    target_return: Annotated[
        list[str] | None,
        typer.Option(
            help="Return-conditioned agents: targets as a list (3600 1800, or 3600,1800) or a "
            "range START:STOP:COUNT (0:3600:10); may be repeated. Negative targets: use the "
            "comma form (-300,-900). Default: the targets of the agent's config."
        ),
    ] = None,
    act_context: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Decision Transformers: condition each action on the last N steps (at most "
            "the training context; default: the agent's dt.act_context, else its context).",
        ),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write all statistics and episodes as JSON.")
    ] = None,
    csv_out: Annotated[
        Path | None, typer.Option("--csv", help="Also write one row per episode as CSV.")
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(help="Return-conditioned agents: PNG of achieved vs target return."),
    ] = None,
    device: Annotated[
        str,
        typer.Option(
            help="Where rlformer models act: auto, cpu or cuda (envs step on the CPU either way; "
            "SB3 models and ONNX exports act on the CPU)."
        ),
    ] = "cpu",
    trust_checkpoint: TrustCheckpoint = False,
) -> None:
    """Evaluate agents: mean, std, median, IQM with bootstrap 95% CIs, D4RL score, success.

    Memory is reset at every episode start. Agents are evaluated on --env, on every task of
    --suite whose spaces they fit, or on the env they were trained on.
    """
    from rlformer.policies import load_policy

    if env is not None and suite is not None:
        fail("give either --env or --suite, not both")
    agents, targets = _eval_targets(agents, target_return)
    for out in (json_out, csv_out, plot):
        if out is not None:  # fail now, not after a long evaluation
            _check_writable(out)
    try:
        loaded = [load_policy(name, trust=trust_checkpoint, device=device) for name in agents]
        if targets is not None and not any(p.info.return_conditioned for p in loaded):
            fail("--target-return conditions Decision Transformers; none of the agents is one")
        if act_context is not None:
            _set_act_context(loaded, act_context)
        if stochastic:
            _check_can_sample(loaded)
        reports, skipped, title = _run_evaluations(
            loaded, env, suite, episodes, seeds, num_envs, not stochastic, targets
        )
        if plot is not None and not any(r.target_return is not None for r in reports):
            fail("--plot draws achieved vs target return: it needs a Decision Transformer")
    except _user_errors() as err:
        fail(str(err))
    from rlformer.evaluation.report import print_reports

    print_reports(reports, title)
    for line in skipped:
        typer.echo(f"skipped {line}", err=True)
    _write_eval_outputs(reports, loaded, json_out, csv_out, plot)


def _eval_targets(
    agents: list[str], target_return: list[str] | None
) -> tuple[list[str], list[float] | None]:
    """The agents and the parsed ``--target-return`` values (None when not given).

    Negative targets after ``--target-return`` reach typer as extra agent names: they are taken
    back from the agent list here.
    """
    from rlformer.evaluation.report import parse_target_returns

    if not target_return:
        return agents, None
    agents, more_targets = _split_targets_from_agents(agents)
    try:
        targets = parse_target_returns(",".join([*target_return, *more_targets]))
    except ValueError as err:
        fail(str(err))
    if not agents:
        fail("no agent given: name a run directory, checkpoint or sb3:PATH.zip")
    return agents, targets


def _run_evaluations(
    loaded: list[Policy],
    env: str | None,
    suite: Path | None,
    episodes: int | None,
    seeds: int | None,
    num_envs: int,
    deterministic: bool,
    targets: list[float] | None,
) -> tuple[list[EvaluationReport], list[str], str]:
    """Every agent on ``suite``'s tasks, on ``env``, or on its own training env: the reports,
    the suite tasks skipped (with why) and the table's title."""
    from rlformer.evaluation.report import evaluate_suite, evaluate_task
    from rlformer.evaluation.suites import load_suite

    if suite is not None:
        chosen = load_suite(suite)
        reports, skipped = evaluate_suite(
            loaded, chosen, num_envs, deterministic, targets, episodes, seeds
        )
        return reports, skipped, f"suite {chosen.name}"
    reports = []
    for policy in loaded:
        env_cfg = _eval_env(policy, env)
        reports += evaluate_task(
            policy, env_cfg, episodes or 20, seeds or 1, num_envs, deterministic, targets
        )
    return reports, [], "rlformer eval"


def _write_eval_outputs(
    reports: list[EvaluationReport],
    loaded: list[Policy],
    json_out: Path | None,
    csv_out: Path | None,
    plot: Path | None,
) -> None:
    """The JSON, CSV and return-sweep PNG that ``rlformer eval`` was asked for."""
    from rlformer.evaluation.plots import plot_return_sweep
    from rlformer.evaluation.report import write_csv, write_json

    if json_out is not None:
        ranges = {p.info.name: p.info.dataset_returns for p in loaded if p.info.dataset_returns}
        write_json(reports, json_out, dataset_returns=ranges)
    if csv_out is not None:
        write_csv(reports, csv_out)
    if plot is not None:
        conditioned = [r for r in reports if r.target_return is not None]
        ranges = [p.info.dataset_returns for p in loaded if p.info.dataset_returns]
        plot_return_sweep(conditioned, plot, ranges[0] if len(ranges) == 1 else None)
        typer.echo(f"wrote {plot}")


def _set_act_context(policies: list[Policy], steps: int) -> None:
    """``--act-context``: every policy with an acting context (a Decision Transformer) acts on
    its last ``steps`` steps, or the command fails before evaluating anything."""
    chosen = [p for p in policies if hasattr(p, "set_act_context")]
    if not chosen:
        fail("--act-context is for Decision Transformers; none of the agents is one")
    for policy in chosen:
        try:
            policy.set_act_context(steps)  # type: ignore[attr-defined]
        except ValueError as err:
            fail(f"--act-context: {err}")


def _check_can_sample(policies: list[Policy]) -> None:
    """``--stochastic``: fail before evaluating anything if a policy has nothing to sample."""
    for policy in policies:
        if (problem := policy.info.sampling_problem) is not None:
            fail(f"--stochastic: {policy.info.name}: {problem}; evaluate it without --stochastic")


def _check_writable(path: Path) -> None:
    """Create the output's folder and make sure a file can be written there."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        fail(f"cannot write {path}: {err.strerror or err}")
    if path.is_dir() or not os.access(path.parent, os.W_OK):
        fail(f"cannot write {path}: not a writable file path")


def _split_targets_from_agents(args: list[str]) -> tuple[list[str], list[str]]:
    """``--target-return 3600 1800`` gives the option one value and leaves 1800 among the
    agents (an option takes one value on the command line); numbers and ranges there that
    name no file are targets too."""
    agents, targets = [], []
    for arg in args:
        is_target = re.fullmatch(r"[-+.\d:eE]+", arg) is not None and not Path(arg).exists()
        (targets if is_target else agents).append(arg)
    return agents, targets


def _eval_env(policy: Policy, env_id: str | None):  # noqa: ANN202 - EnvConfig
    """--env if given (registered kwargs), else the env the policy was trained on."""
    from rlformer.config import EnvConfig
    from rlformer.rollout.env_factory import EnvError

    if env_id is not None:
        # Another task for a trained agent keeps the agent's imports and wrappers: they made
        # the observations it was trained on.
        training = policy.info.training_env
        if training is None:
            return EnvConfig(id=env_id)
        return EnvConfig(id=env_id, imports=training.imports, wrappers=training.wrappers)
    if policy.info.training_env is None:
        raise EnvError(f"{policy.info.name}: give --env ENV_ID or --suite FILE to evaluate it")
    return policy.info.training_env


@app.command()
def plot(
    runs: Annotated[list[Path], typer.Argument(help="Run directories to draw, one line each.")],
    metric: Annotated[
        list[str] | None,
        typer.Option(help="Metric to draw (repeat for more panels); default: the main one."),
    ] = None,
    out: Annotated[Path, typer.Option(help="Output PNG.")] = Path("learning_curves.png"),
    smooth: Annotated[
        int, typer.Option(min=1, help="Trailing moving average over this many logged rows.")
    ] = 1,
) -> None:
    """Learning curves from run directories' metrics.jsonl as a PNG."""
    from rlformer.evaluation.plots import plot_learning_curves

    try:
        path = plot_learning_curves(runs, out, metric, smooth)
    except (FileNotFoundError, ValueError) as err:
        fail(str(err))
    typer.echo(f"wrote {path}")


@app.command()
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
    except _user_errors() as err:
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


@app.command("export")
def export(
    policy: Annotated[str, typer.Argument(help="Run directory or checkpoint file to export.")],
    out: Annotated[Path, typer.Option(help="Directory to write the graph and policy.json to.")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="onnx (policy.onnx, runs with onnxruntime alone) or torch-export (policy.pt2).",
        ),
    ] = "onnx",
    trust_checkpoint: TrustCheckpoint = False,
) -> None:
    """Export a trained policy's act step (PPO actor or Decision Transformer) for deployment.

    The graph holds normalisation, episode resets and the env's action format; policy.json
    describes its inputs, state and sampling. `rlformer eval DIR` evaluates the export.
    """
    from rlformer.export.writer import ExportError, export_policy
    from rlformer.extras import MissingExtra, require
    from rlformer.policies import load_policy

    try:
        require("export", "rlformer export")
        written = export_policy(load_policy(policy, trust=trust_checkpoint), out, fmt)
    except (*_user_errors(), ExportError, MissingExtra) as err:
        fail(str(err))
    typer.echo(f"wrote {written}")


@app.command("serve")
def serve_command(
    policy: Annotated[
        str, typer.Argument(help="Run directory, checkpoint file or export directory to serve.")
    ],
    port: Annotated[int, typer.Option(min=1, max=65535, help="HTTP port.")] = 8000,
    host: Annotated[str, typer.Option(help="Address to listen on (0.0.0.0: all).")] = "127.0.0.1",
    replicas: Annotated[
        int, typer.Option(min=1, help="Policy replicas; a session always reaches the same one.")
    ] = 1,
    max_batch: Annotated[
        int, typer.Option(min=1, help="Most sessions' steps batched into one forward pass.")
    ] = 64,
    session_ttl: Annotated[
        float, typer.Option(min=0.001, help="Seconds an idle session is kept.")
    ] = 600.0,
    max_sessions: Annotated[
        int, typer.Option(min=1, help="Sessions per replica; beyond, the least recently used go.")
    ] = 10_000,
    address: Annotated[
        str | None,
        typer.Option(
            help="Ray cluster to join, HOST:PORT (default: a Ray of its own, whatever "
            "RAY_ADDRESS says); one with token authentication also needs RAY_AUTH_MODE=token."
        ),
    ] = None,
    name: Annotated[
        str,
        typer.Option(help="Serve application name; on a cluster, one no other server holds."),
    ] = "rlformer",
    route_prefix: Annotated[
        str,
        typer.Option(help="URL path the routes hang under (on a cluster: one not taken)."),
    ] = "/",
    stateless: Annotated[
        bool,
        typer.Option(
            "--stateless",
            help="Keep no sessions: POST /v1/act carries the sealed state of the previous answer, "
            "and any replica answers.",
        ),
    ] = False,
    state_key_file: Annotated[
        Path | None,
        typer.Option(
            help="With --stateless: file of at least 32 bytes that signs the state blobs "
            "(default: a random key per start, so blobs die with the server)."
        ),
    ] = None,
    trust_checkpoint: TrustCheckpoint = False,
) -> None:
    """Serve a policy over HTTP/JSON with Ray Serve, each client session's memory on the server.

    POST /v1/sessions/ID/act, DELETE /v1/sessions/ID, GET /v1/health, GET /v1/policy (with
    --stateless: POST /v1/act instead of the sessions); see docs/guides/serving.md.
    The URL is printed once the server answers. Ctrl-C stops it (on a cluster: deletes only
    this server's application).
    """
    from rlformer.extras import MissingExtra, require

    try:
        require("serve", "rlformer serve")
    except MissingExtra as err:
        fail(str(err))
    from rlformer.serve import ServeOptions, load_servable, serve_forever
    from rlformer.serve.batched_steps import UnservablePolicy
    from rlformer.serve.launch import ServeStartError, normalize_route_prefix
    from rlformer.serve.state_blob import read_state_key

    if state_key_file is not None and not stateless:
        fail("--state-key-file signs the state blobs of --stateless; add --stateless")
    try:
        key = "" if state_key_file is None else read_state_key(state_key_file)
    except (OSError, ValueError) as err:
        fail(f"--state-key-file: {err}")
    try:
        loaded = load_servable(policy, trust=trust_checkpoint)
    except (*_user_errors(), UnservablePolicy) as err:
        fail(str(err))
    options = ServeOptions(
        replicas=replicas,
        max_batch=max_batch,
        session_ttl_s=session_ttl,
        max_sessions=max_sessions,
        stateless=stateless,
        state_key=key,
    )
    try:
        where = {"host": host, "port": port, "address": address}
        where |= {"name": name, "route_prefix": normalize_route_prefix(route_prefix)}
        serve_forever(
            loaded,
            options,
            announce=lambda url: typer.echo(f"serving {policy} at {url} (Ctrl-C stops)"),
            **where,
        )
    except ServeStartError as err:
        fail(str(err))


@dataset_app.command("info")
def dataset_info(
    path: Annotated[str, typer.Argument(help="d4rl:FILE, minari:ID or an rlformer recording.")],
) -> None:
    """Print episodes, transitions, return statistics, spaces and D4RL-normalised returns."""
    from rlformer.data import load_dataset
    from rlformer.data.inspect import format_summary, summarize_dataset

    try:
        dataset = load_dataset(path)
    except _user_errors() as err:
        fail(str(err))
    typer.echo(format_summary(summarize_dataset(dataset)))


@sweep_app.command("run")
def sweep_run(
    file: Annotated[Path, typer.Argument(help="Sweep file (configs/sweeps/*.yaml).")],
    address: RayAddress = None,
    dir_: Annotated[
        Path | None,
        typer.Option("--dir", help="Sweep folder (default: the file's `dir`, else sweeps/NAME)."),
    ] = None,
    dry_run: DryRunTrials = False,
) -> None:
    """Run a sweep file's trials on Ray Tune (same command again: continue a killed sweep).

    Each trial is an ordinary run directory under DIR/trials/; Tune's state lives in DIR/tune/.
    Exit status 1 when a trial failed (the others still ran), 130 when interrupted (Ctrl-C).
    """
    from rlformer.sweep.spec import load_sweep

    try:
        sweep = load_sweep(file, dir_)
        if dry_run:
            from rlformer.sweep.runner import check_sweep

            check_sweep(sweep)
            for trial in sweep.trials:
                typer.echo(trial.name)
            typer.echo(f"ok: {len(sweep.trials)} trials, folder {sweep.directory}")
            return
        from rlformer.sweep.runner import run_sweep

        outcome = run_sweep(sweep, address)
    except _user_errors() as err:
        fail(str(err))
    # Without a scheduler nothing stops a trial early: an unfinished one was interrupted.
    label = "stopped early" if sweep.spec.scheduler is not None else "unfinished"
    typer.echo(
        f"sweep {outcome.directory}: {len(outcome.finished)} finished, "
        f"{len(outcome.stopped_early)} {label}, {len(outcome.errored)} failed"
    )
    if outcome.stopped_early and sweep.spec.scheduler is None:
        typer.echo("run the same command again to continue the unfinished trials", err=True)
    for name, error in outcome.errored.items():
        typer.echo(f"failed: {name}: {error}", err=True)
    typer.echo(f"report: rlformer sweep report {outcome.directory}")
    if outcome.errored:
        raise typer.Exit(RUN_FAILED_EXIT)
    if outcome.stopped_early and sweep.spec.scheduler is None:
        raise typer.Exit(130)  # interrupted (Tune ends the run on SIGINT and saves its state)


@sweep_app.command("report")
def sweep_report(
    directory: Annotated[Path, typer.Argument(help="A sweep folder (holds sweep.json).")],
    metric: Annotated[
        str | None, typer.Option(help="Final score to compare (default: the sweep's `score`).")
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the table as JSON.")
    ] = None,
    csv_out: Annotated[Path | None, typer.Option("--csv", help="Write the table as CSV.")] = None,
    plot: Annotated[
        Path | None,
        typer.Option(help="PNG: final scores per variant (95% CIs) and learning curves."),
    ] = None,
) -> None:
    """One table across variants and tasks: mean, IQM and bootstrap 95% CIs over seeds."""
    from rlformer.sweep.report import (
        format_table,
        load_sweep_results,
        plot_sweep,
        summarize,
        write_csv,
        write_json,
    )

    for out in (json_out, csv_out, plot):
        if out is not None:
            _check_writable(out)
    try:
        results = load_sweep_results(directory, metric)
    except (ValueError, FileNotFoundError) as err:
        fail(str(err))
    rows = summarize(results)
    typer.echo(format_table(rows, results))
    if json_out is not None:
        write_json(rows, results, json_out)
        typer.echo(f"wrote {json_out}")
    if csv_out is not None:
        write_csv(rows, csv_out)
        typer.echo(f"wrote {csv_out}")
    if plot is not None:
        plot_sweep(results, rows, plot)
        typer.echo(f"wrote {plot}")


tune_app = typer.Typer(
    cls=_SweepGroup,
    help="Hyperparameter search on Ray Tune: `rlformer tune FILE` searches (or resumes) and "
    "writes best.yaml with its evidence, `rlformer tune report DIR` prints it again.",
    no_args_is_help=True,
)
app.add_typer(tune_app, name="tune")


@tune_app.command("run")
def tune_run(
    file: Annotated[Path, typer.Argument(help="Tune file (configs/tune/*.yaml).")],
    address: RayAddress = None,
    dir_: Annotated[
        Path | None,
        typer.Option("--dir", help="Tune folder (default: the file's `dir`, else tune/NAME)."),
    ] = None,
    dry_run: DryRunTrials = False,
) -> None:
    """Search a tune file's space on Ray Tune; write best.yaml, trials.md/.csv, curves.png.

    Each trial is an ordinary run directory under DIR/trials/; the same command again continues
    a killed tune. Exit status 1 when a trial failed (the others still ran).
    """
    from rlformer.sweep.tune_spec import load_tune

    try:
        tune = load_tune(file, dir_)
        if dry_run:
            from rlformer.sweep.tuner import check_tune

            check_tune(tune)
            if tune.sweep is not None:
                for trial in tune.sweep.trials:
                    typer.echo(trial.name)
            count = len(tune.sweep.trials) if tune.sweep is not None else tune.spec.num_samples
            typer.echo(
                f"ok: {count} trials ({tune.spec.search} search, "
                f"{tune.spec.scheduler.type}), folder {tune.directory}"
            )
            return
        from rlformer.sweep.tuner import run_tune

        outcome = run_tune(tune, address)
    except _user_errors() as err:
        fail(str(err))
    _tune_report(outcome.directory, list(outcome.errored))
    for name, error in outcome.errored.items():
        typer.echo(f"failed: {name}: {error}", err=True)
    if outcome.errored:
        raise typer.Exit(RUN_FAILED_EXIT)


@tune_app.command("report")
def tune_report(
    directory: Annotated[Path, typer.Argument(help="A tune folder (holds tune.json).")],
) -> None:
    """Rewrite best.yaml, trials.md/.csv and curves.png from a tune folder; print the summary."""
    _tune_report(directory, None)


def _tune_report(directory: Path, errored: list[str] | None) -> None:
    from rlformer.sweep.tune_report import load_tune_results, summary, write_outputs

    try:
        results = load_tune_results(directory, errored)
    except (ValueError, FileNotFoundError) as err:
        fail(str(err))
    write_outputs(results)
    typer.echo((directory / "trials.md").read_text().rstrip())
    typer.echo(summary(results))


@app.command("config-doc")
def config_doc() -> None:
    """List every config key with its default and description."""
    from rlformer.config import reference_lines

    for line in reference_lines():
        typer.echo(line)


def add_working_directory_to_path() -> None:
    """Let ``env.id: module:EnvId``, ``env.imports`` and wrappers find modules in the folder
    the command runs from, as ``python -m`` would.

    A console script puts its own folder first on ``sys.path``, not the working directory.
    The directory is appended (an installed package of the same name still wins) and also
    added to ``PYTHONPATH``, which processes started from here inherit: an embedded Ray's
    workers, Tune trials, subprocess evaluations.
    """
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    entries = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    if cwd not in entries:
        os.environ["PYTHONPATH"] = os.pathsep.join([*entries, cwd])


def main() -> None:
    """Console entry point."""
    add_working_directory_to_path()
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
