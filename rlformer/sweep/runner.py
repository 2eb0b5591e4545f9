"""Run a sweep's trials as Ray Tune trials, each an ordinary rlformer run; resume after a kill.

Layout of a sweep folder (``sweeps/NAME/`` unless ``--dir``)::

    sweep.json                   the trials (name, task, variant, axis values, seed) and metrics
    trials/<trial>/run-*/        the trial's run directory (config, metrics, tb/, checkpoints/)
    trials/<trial>/done.json     written when the trial's run finished: its final metrics
    trials/<trial>/attempts.jsonl  one line per attempt: the first iteration it trained
    tune/                        Ray Tune's experiment state (Tuner.restore continues it)

Restarting the same command continues the sweep: Tune restores its experiment and re-launches
unfinished (and errored) trials; a re-launched trial finds its run directory and resumes it from
its newest checkpoint, and a trial with ``done.json`` only reports its final metrics again, so
no finished run is trained twice, even one that finished after Tune's last state save.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlformer.config import ConfigError, TrainConfig, train_config_model
from rlformer.config.sections.registry import algorithm_spec
from rlformer.sweep.spec import Sweep

TUNE_FOLDER = "tune"
LOCK_WAIT_S = 120.0
"""How long a relaunched trial waits for the process of its previous attempt to let go."""


@dataclass
class SweepOutcome:
    """How a ``rlformer sweep`` invocation ended."""

    directory: Path
    finished: list[str]
    errored: dict[str, str]
    stopped_early: list[str]


def check_sweep(sweep: Sweep) -> None:
    """Fail before Ray starts: every task's env builds, the folder belongs to this sweep."""
    from rlformer.rollout.env_factory import check_spaces, env_from_config
    from rlformer.runs.directory import check_run_root

    seen = set()
    for trial in sweep.trials:
        env = trial.config.env
        key = json.dumps(env.model_dump(mode="json"), sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        try:
            built = env_from_config(env)  # imports and wrappers included
            try:
                check_spaces(built.observation_space, built.action_space, env)
            finally:
                built.close()
        except Exception as err:  # noqa: BLE001 - any failure to build the env is the user's
            raise ConfigError(f"{sweep.source}: trial {trial.name}: env {env.id}: {err}") from None
    check_run_root(sweep.directory)
    index = sweep.directory / "sweep.json"
    if index.exists():
        previous = json.loads(index.read_text())
        if previous.get("trials") != _index(sweep)["trials"]:
            raise ConfigError(
                f"{sweep.directory} holds a different sweep (its trials differ from "
                f"{sweep.source}'s); give another --dir or remove that folder"
            )


def _index(sweep: Sweep) -> dict[str, Any]:
    return {
        "name": sweep.spec.name,
        "source": str(sweep.source),
        "metric": sweep.spec.metric,
        "mode": sweep.spec.mode,
        "score": sweep.spec.score_metric,
        "trials": [
            {
                "name": t.name,
                "task": t.task,
                "variant": t.variant,
                "values": t.values,
                "seed": t.seed,
                "config": t.config.model_dump(mode="json"),
            }
            for t in sweep.trials
        ],
    }


def run_sweep(
    sweep: Sweep, address: str | None = None, verbose: int = 1, scheduler: Any = None
) -> SweepOutcome:
    """Run (or continue) every trial of ``sweep`` through a Ray Tune ``Tuner``.

    Args:
        sweep: A loaded sweep (see :func:`rlformer.sweep.spec.load_sweep`).
        address: ``None`` starts an embedded Ray; ``"auto"`` or ``host:port`` joins a cluster.
        verbose: Tune's verbosity (0 silent, 1 status tables).
        scheduler: A Tune scheduler to use instead of the sweep file's (``rlformer tune``).
    """
    check_sweep(sweep)
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # plain status tables, not the new UI
    os.environ.setdefault("RAY_TRAIN_ENABLE_V2_MIGRATION_WARNINGS", "0")
    import ray

    # Tune warns about every trial that had not reported yet when the sweep stopped; the
    # summary at the end says the same in one line.
    logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)

    sweep.directory.mkdir(parents=True, exist_ok=True)
    (sweep.directory / "sweep.json").write_text(json.dumps(_index(sweep), indent=1))
    names = sorted(t.name for t in sweep.trials)
    if all((sweep.directory / "trials" / name / "done.json").exists() for name in names):
        # Nothing left to train: Tune would only report the finished trials again, after a
        # Ray start (seconds, hundreds of MB) that a relaunched finished sweep does not need.
        return SweepOutcome(sweep.directory, names, {}, [])
    owns_ray = _start_ray(address)
    try:
        grid = _tuner(sweep, verbose, scheduler).fit()
    finally:
        if owns_ray:
            ray.shutdown()
    return _outcome(sweep, grid)


def _start_ray(address: str | None) -> bool:
    """Start an embedded Ray (``address`` None) or join a cluster, unless Ray runs already in
    this process; True when this call started it (and the sweep must shut it down)."""
    import ray

    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    if address is None:
        ray.init(address="local", include_dashboard=False, **options)
        return True
    _check_reachable(address)
    try:
        ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise ConfigError(f"--address {address}: cannot join a Ray cluster: {err}") from None
    return True


def _tuner(sweep: Sweep, verbose: int, scheduler: Any = None) -> Any:
    """The sweep's ``tune.Tuner``: restored from its folder when one was started there (so a
    killed sweep continues its unfinished and errored trials), else a new grid over the
    trials."""
    from ray import tune

    spec = sweep.spec
    trials = {t.name: t.config.model_dump(mode="json") for t in sweep.trials}
    resources = {
        name: _resources(sweep, train_config_model().model_validate(c))
        for name, c in trials.items()
    }
    trainable = tune.with_resources(
        tune.with_parameters(run_trial, trials=trials, metric=spec.metric),
        lambda config: resources[config["trial"]],
    )
    experiment = sweep.directory / TUNE_FOLDER
    if tune.Tuner.can_restore(str(experiment)):
        return tune.Tuner.restore(
            str(experiment), trainable, resume_unfinished=True, resume_errored=True
        )
    return tune.Tuner(
        trainable,
        param_space={"trial": tune.grid_search(list(trials))},
        tune_config=tune.TuneConfig(
            scheduler=scheduler if scheduler is not None else _scheduler(sweep),
            max_concurrent_trials=spec.max_concurrent or None,
            # A finished trial's process runs the next one: torch and rlformer are imported
            # once, not per trial (3-4 s of CPU each here). Every trial seeds itself from
            # its config, so where it runs changes nothing it computes.
            reuse_actors=True,
            trial_name_creator=_trial_name,
            trial_dirname_creator=_trial_name,
        ),
        run_config=tune.RunConfig(
            name=TUNE_FOLDER,
            storage_path=str(sweep.directory),
            verbose=verbose,
            progress_reporter=tune.CLIReporter(
                metric_columns=["iteration", spec.metric],
                parameter_columns={"trial": "trial"},
                max_report_frequency=30,
                max_progress_rows=50,
            ),
        ),
    )


def _scheduler(sweep: Sweep) -> Any:
    """ASHA early stopping over training iterations when the sweep asks for it, else None."""
    spec = sweep.spec
    if spec.scheduler is None:
        return None
    from ray.tune.schedulers import ASHAScheduler

    return ASHAScheduler(
        time_attr="iteration",
        metric=spec.metric,
        mode=spec.mode,
        max_t=max(_iterations(t.config) for t in sweep.trials),
        grace_period=spec.scheduler.grace_period,
        reduction_factor=spec.scheduler.reduction_factor,
    )


def _check_reachable(address: str) -> None:
    """Fail in seconds, not minutes, when a ``host:port`` address has nothing listening."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return  # 'auto' (Ray looks for a local cluster) or a scheme Ray resolves itself
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as err:
        raise ConfigError(
            f"--address {address}: no Ray cluster answers there ({err.strerror or err}); start "
            "one with `ray start --head` or leave out --address for an embedded Ray"
        ) from None


def _trial_name(trial: Any) -> str:
    return str(trial.config["trial"])


def _iterations(cfg: TrainConfig) -> int:
    planned = algorithm_spec(cfg.algo).planned_iterations
    assert planned is not None, "sweeps refuse algorithms without planned_iterations"
    return planned(cfg)


def _resources(sweep: Sweep, cfg: TrainConfig) -> Any:
    """One bundle for the trial; a Ray-backend trial adds one per rollout actor (same PG)."""
    from ray import tune

    own: dict[str, float] = {"CPU": sweep.spec.resources.cpu}
    if sweep.spec.resources.gpu:
        own["GPU"] = sweep.spec.resources.gpu
    bundles = [own]
    if cfg.rollout.backend == "ray":
        bundles += [{"CPU": cfg.rollout.worker_cpus}] * cfg.rollout.num_workers
    return tune.PlacementGroupFactory(bundles)


def _outcome(sweep: Sweep, grid: Any) -> SweepOutcome:
    finished, stopped, errored = [], [], {}
    for result in grid:
        # A trial that failed before it started has no config; its folder carries its name.
        name = str(result.config["trial"]) if result.config else Path(result.path).name
        if result.error is not None:
            errored[name] = str(result.error).strip().splitlines()[-1][:300]
        elif (sweep.directory / "trials" / name / "done.json").exists():
            finished.append(name)
        else:
            stopped.append(name)
    return SweepOutcome(sweep.directory, sorted(finished), errored, sorted(stopped))


# ----------------------------------------------------------------- inside a Tune trial
def run_trial(config: dict[str, Any], trials: dict[str, dict[str, Any]], metric: str) -> None:
    """The Tune trainable: train (or resume, or just re-report) one trial's rlformer run."""
    import torch
    from ray import tune

    torch.set_num_threads(1)
    run_one(train_config_model().model_validate(trials[config["trial"]]), metric, tune.report)


def run_one(
    cfg: TrainConfig,
    metric: str,
    report_to: Callable[[dict[str, Any]], None],
    start_from: Callable[[Path], Path | None] | None = None,
) -> dict[str, Any]:
    """Train (or resume, or just re-report) the run in ``cfg.run.root``; its final metrics.

    Each iteration's metrics go to ``report_to`` (with ``iteration`` and ``metric``); the final
    metrics are reported after the final evaluation and kept in ``done.json``. ``start_from``
    (PBT) may put another trial's checkpoint into the folder and return the run directory to
    resume from it.
    """
    import ray

    from rlformer.runs.directory import RunDirError, RunLock
    from rlformer.runs.training import train

    folder = Path(cfg.run.root)
    done = folder / "done.json"
    if done.exists():  # finished before the sweep was killed: report, never train again
        final = json.loads(done.read_text())
        report_to(final)
        return final
    folder.mkdir(parents=True, exist_ok=True)
    run_dir = _previous_run(folder)
    if run_dir is not None:  # the previous attempt's process may still be dying: wait for it
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                with RunLock(run_dir):
                    break
            except RunDirError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)
        if not (run_dir / "checkpoints" / "latest").exists():  # killed before a checkpoint
            _remove_tree(run_dir)
            run_dir = None
    if start_from is not None:
        run_dir = start_from(folder) or run_dir

    first, total = True, _iterations(cfg)

    def report(iteration: int, metrics: dict[str, float]) -> None:
        nonlocal first
        if first:  # one line per attempt: a resumed trial shows where it picked up
            first = False
            with open(folder / "attempts.jsonl", "a") as f:
                f.write(json.dumps({"first_iteration": iteration, "pid": os.getpid()}) + "\n")
        if iteration == total:  # reported after the final evaluation instead (below), so a
            return  # scheduler's stop at max_t never cuts a finished run short of its eval
        report_to({**metrics, "iteration": iteration, metric: metrics.get(metric, math.nan)})

    result = train(cfg, resume_dir=run_dir, on_iteration=report)
    final = _final_metrics(result.run_dir, metric, result.iterations)
    final["env_steps"] = result.env_steps
    final["node_id"] = ray.get_runtime_context().get_node_id()  # where it ran (clusters)
    _atomic_json(done, final)
    report_to(final)
    return final


def _previous_run(folder: Path) -> Path | None:
    runs = sorted(p for p in folder.glob("run-*") if p.is_dir())
    return runs[-1] if runs else None


def _final_metrics(run_dir: Path, metric: str, iterations: int) -> dict[str, Any]:
    from rlformer.runs.directory import read_metrics

    final: dict[str, Any] = {}
    for row in read_metrics(run_dir):
        final.update(row)
    final.update({"iteration": iterations, "run_dir": str(run_dir), "done": True})
    final.setdefault(metric, math.nan)
    return final


def _atomic_json(path: Path, data: dict[str, Any]) -> None:
    from rlformer.runs.directory import atomic_write_bytes

    atomic_write_bytes(path, json.dumps(data, indent=1).encode())


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
