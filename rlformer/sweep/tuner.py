"""``rlformer tune``: search a config space on Ray Tune; each trial an ordinary run directory.

Random search is a random sweep (:mod:`rlformer.sweep.runner` runs it, with the tune's scheduler):
its trials are drawn before Ray starts, so each has a fixed name, folder and validated config.
Optuna and PBT choose values while the tune runs: their trials are built here from the base
config and the values Tune hands them, then run by the same :func:`~rlformer.sweep.runner.run_one`
(resume from the newest checkpoint, ``done.json``, ``attempts.jsonl``). Same layout either way::

    tune.json                the tune file's spec, the base config (what ``tune report`` reads)
    sweep.json               random search: the trials and their configs (``sweep report`` too)
    trials/<trial>/trial.json  Optuna / PBT: the trial's values and config
    trials/<trial>/run-*/    the trial's run directory
    tune/                    Ray Tune's experiment state (the same command again restores it)
    best.yaml, trials.csv, trials.md, curves.png   written at the end (:mod:`tune_report`)
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from rlformer.config import ConfigError, TrainConfig, build_config
from rlformer.sweep.runner import (
    TUNE_FOLDER,
    SweepOutcome,
    _resources,
    _start_ray,
    check_sweep,
    run_one,
    run_sweep,
)
from rlformer.sweep.spec import Sweep, _set_path
from rlformer.sweep.tune_spec import TIME_ATTRS, Tune, is_named, time_value

__all__ = ["check_tune", "native_trial", "run_tune", "trial_config"]


def check_tune(tune: Tune) -> None:
    """Fail before Ray starts: the env builds, the folder holds no other tune."""
    sweep = tune.sweep
    if sweep is None:  # check the base config's env; the values were checked at load
        sweep = _probe_sweep(tune)
    check_sweep(sweep)
    index = tune.directory / "tune.json"
    if index.exists() and json.loads(index.read_text()).get("spec") != _index(tune)["spec"]:
        raise ConfigError(
            f"{tune.directory} holds a different tune (its file differs from {tune.source}'s); "
            "give another --dir or remove that folder"
        )


def _probe_sweep(tune: Tune) -> Sweep:
    from rlformer.sweep.spec import Trial

    probe = Trial("base", "", "base", {}, tune.base.run.seed, tune.base)
    return Sweep(tune.spec.sweep_spec(), tune.source, tune.directory / ".probe", [probe])


def _index(tune: Tune) -> dict[str, Any]:
    return {
        "name": tune.spec.name,
        "source": str(tune.source),
        "spec": tune.spec.model_dump(mode="json"),
        "base": tune.base.model_dump(mode="json"),
    }


def run_tune(tune: Tune, address: str | None = None, verbose: int = 1) -> SweepOutcome:
    """Run (or continue) ``tune``'s trials; the caller writes the report from the folder."""
    check_tune(tune)
    tune.directory.mkdir(parents=True, exist_ok=True)
    (tune.directory / "tune.json").write_text(json.dumps(_index(tune), indent=1))
    if tune.sweep is not None:
        return run_sweep(tune.sweep, address, verbose, _scheduler(tune))
    return _run_native(tune, address, verbose)


def _time(tune: Tune) -> tuple[str, int]:
    """Tune's time attribute and the trials' length in it."""
    unit = tune.spec.scheduler.time if tune.spec.scheduler.type != "none" else "iterations"
    return TIME_ATTRS[unit], time_value(unit, tune.spec.budget, tune.base)


def _scheduler(tune: Tune) -> Any:
    spec, kind = tune.spec, tune.spec.scheduler
    if kind.type == "none":
        from ray.tune.schedulers import FIFOScheduler

        return FIFOScheduler()
    time_attr, max_t = _time(tune)
    if kind.type == "asha":
        from ray.tune.schedulers import ASHAScheduler

        grace = kind.grace_period or max(1, round(max_t / kind.reduction_factor**2))
        return ASHAScheduler(
            time_attr=time_attr,
            metric=spec.metric,
            mode=spec.mode,
            max_t=max_t,
            grace_period=min(grace, max_t),
            reduction_factor=kind.reduction_factor,
        )
    from ray.tune.schedulers import PopulationBasedTraining

    return PopulationBasedTraining(
        time_attr=time_attr,
        metric=spec.metric,
        mode=spec.mode,
        perturbation_interval=kind.perturbation_interval,
        hyperparam_mutations=_param_space(tune),
        quantile_fraction=kind.quantile_fraction,
        resample_probability=kind.resample_probability,
        synch=kind.synch,
    )


def _param_space(tune: Tune) -> dict[str, Any]:
    """The space as Tune's distributions (a named axis: a choice of its option names)."""
    from ray import tune as ray_tune

    space: dict[str, Any] = {}
    for key, axis in tune.spec.space.items():
        if isinstance(axis, list):
            space[key] = ray_tune.choice(axis)
        elif is_named(axis):
            space[key] = ray_tune.choice(list(axis))
        else:
            ((kind, (low, high)),) = axis.items()
            space[key] = getattr(ray_tune, kind)(low, high)
    return space


def _run_native(tune: Tune, address: str | None, verbose: int) -> SweepOutcome:
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    os.environ.setdefault("RAY_TRAIN_ENABLE_V2_MIGRATION_WARNINGS", "0")
    import ray

    owns_ray = _start_ray(address)
    try:
        grid = _native_tuner(tune, verbose).fit()
    finally:
        if owns_ray:
            ray.shutdown()
    finished, stopped, errored = [], [], {}
    for result in grid:
        name = Path(result.path).name
        if result.error is not None:
            errored[name] = str(result.error).strip().splitlines()[-1][:300]
        elif (tune.directory / "trials" / name / "done.json").exists():
            finished.append(name)
        else:
            stopped.append(name)
    return SweepOutcome(tune.directory, sorted(finished), errored, sorted(stopped))


def _native_tuner(tune: Tune, verbose: int) -> Any:
    from ray import tune as ray_tune

    spec = tune.spec
    trainable = ray_tune.with_resources(
        ray_tune.with_parameters(
            native_trial,
            base=tune.base_raw,
            space=spec.space,
            folder=str(tune.directory),
            metric=spec.metric,
            first_seed=spec.first_seed,
            pbt=spec.scheduler.type == "pbt",
        ),
        _resources(_probe_sweep(tune), tune.base),
    )
    experiment = tune.directory / TUNE_FOLDER
    if ray_tune.Tuner.can_restore(str(experiment)):
        return ray_tune.Tuner.restore(
            str(experiment), trainable, resume_unfinished=True, resume_errored=True
        )
    search_alg = None
    if spec.search == "optuna":
        search_alg = _optuna(spec.metric, spec.mode, spec.sample_seed)
        if spec.max_concurrent:
            from ray.tune.search import ConcurrencyLimiter

            search_alg = ConcurrencyLimiter(search_alg, max_concurrent=spec.max_concurrent)
    return ray_tune.Tuner(
        trainable,
        param_space=_param_space(tune),
        tune_config=ray_tune.TuneConfig(
            num_samples=spec.num_samples,
            search_alg=search_alg,
            scheduler=_scheduler(tune),
            max_concurrent_trials=spec.max_concurrent or None,
            # A finished trial's process runs the next one: torch and rlformer are imported
            # once, not per trial (3-4 s of CPU each here). Every trial seeds itself from
            # its config, so where it runs changes nothing it computes.
            reuse_actors=True,
            trial_name_creator=_trial_name,
            trial_dirname_creator=_trial_name,
        ),
        run_config=ray_tune.RunConfig(
            name=TUNE_FOLDER,
            storage_path=str(tune.directory),
            verbose=verbose,
            # All kept: PBT may restore any member's last checkpoint, even an old one.
            checkpoint_config=ray_tune.CheckpointConfig(num_to_keep=None),
            progress_reporter=ray_tune.CLIReporter(
                metric_columns=["iteration", spec.metric],
                max_report_frequency=30,
                max_progress_rows=50,
            ),
        ),
    )


def _optuna(metric: str, mode: str, seed: int) -> Any:
    try:
        import optuna  # noqa: F401 - only to name the missing package in one line
        from optuna.samplers import TPESampler
        from ray.tune.search.optuna import OptunaSearch
    except ImportError:
        raise ConfigError("search: optuna needs Optuna: pip install optuna") from None
    return OptunaSearch(metric=metric, mode=mode, sampler=TPESampler(seed=seed))


def _trial_name(trial: Any) -> str:
    """``t00003``: the trial's counter, which a restored experiment keeps."""
    return "t" + str(trial.trial_id).rsplit("_", 1)[-1]


def trial_config(
    base: dict[str, Any], space: dict[str, Any], values: dict[str, Any], root: Path, seed: int
) -> TrainConfig:
    """The base config with a trial's values (named options expanded) in ``root``."""
    raw = copy.deepcopy(base)
    for key, value in values.items():
        axis = space.get(key)
        if axis is not None and is_named(axis):
            for sub, sub_value in axis[value].items():
                _set_path(raw, sub, sub_value, f"space {key}.{value}")
        else:
            _set_path(raw, key, value, f"space {key}")
    _set_path(raw, "run.seed", seed, "tune")
    _set_path(raw, "run.name", "run", "tune")
    _set_path(raw, "run.root", str(root), "tune")
    return build_config(raw)


# ----------------------------------------------------------------- inside a Tune trial
def native_trial(
    config: dict[str, Any],
    base: dict[str, Any],
    space: dict[str, Any],
    folder: str,
    metric: str,
    first_seed: int,
    pbt: bool,
) -> None:
    """The Tune trainable of Optuna and PBT trials: build the trial's config from the values
    Tune chose, record them, and train (or resume) its run directory."""
    import torch
    from ray import tune

    torch.set_num_threads(1)
    name = tune.get_context().get_trial_name()
    values = {k: v for k, v in config.items() if k in space}
    seed = first_seed + (int(name[1:]) if pbt and name[1:].isdigit() else 0)
    root = Path(folder) / "trials" / name
    cfg = trial_config(base, space, values, root, seed)
    root.mkdir(parents=True, exist_ok=True)
    record = {"name": name, "values": values, "seed": seed, "config": cfg.model_dump(mode="json")}
    (root / "trial.json").write_text(json.dumps(record, indent=1))
    if not pbt:
        run_one(cfg, metric, tune.report)
        return
    with open(root / "values.jsonl", "a") as f:  # PBT changes them: each start's values
        f.write(json.dumps({"values": values, "pid": os.getpid()}) + "\n")
    run_one(cfg, metric, _report_with_checkpoints(root, name), _start_from_checkpoint(name))


def _latest_checkpoint(run_dir: Path) -> Path | None:
    pointer = run_dir / "checkpoints" / "latest"
    if not pointer.is_file():
        return None
    path = run_dir / "checkpoints" / pointer.read_text().strip()
    return path if path.is_file() else None


def _report_with_checkpoints(root: Path, name: str) -> Any:
    """PBT copies checkpoints between trials: each report after a new rlformer checkpoint
    hands Tune that file (and whose it is)."""
    from ray import tune

    last: list[Path | None] = [None]

    def report(metrics: dict[str, Any]) -> None:
        runs = sorted(p for p in root.glob("run-*") if p.is_dir())
        ckpt = _latest_checkpoint(runs[-1]) if runs else None
        if ckpt is None or ckpt == last[0]:
            tune.report(metrics)
            return
        last[0] = ckpt
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy2(ckpt, Path(tmp) / ckpt.name)
            (Path(tmp) / "trial.json").write_text(json.dumps({"trial": name, "file": ckpt.name}))
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(tmp))

    return report


def _start_from_checkpoint(name: str) -> Any:
    """Where PBT restarts a trial from another trial's checkpoint (exploit): put that file
    into this trial's run directory as its latest, so the run resumes from it with the new
    values (keys a resume may change, checked when the tune file was read)."""
    from ray import tune

    def start_from(folder: Path) -> Path | None:
        checkpoint = tune.get_checkpoint()
        runs = sorted(p for p in folder.glob("run-*") if p.is_dir())
        if checkpoint is None or not runs:
            return None
        run_dir = runs[-1]
        with checkpoint.as_directory() as d:
            meta = json.loads((Path(d) / "trial.json").read_text())
            if meta["trial"] == name:  # its own: the run directory has it already
                return None
            target = run_dir / "checkpoints" / meta["file"]
            shutil.copy2(Path(d) / meta["file"], target)
        (run_dir / "checkpoints" / "latest").write_text(meta["file"])
        with open(folder / "exploits.jsonl", "a") as f:
            f.write(json.dumps({"from": meta["trial"], "checkpoint": meta["file"]}) + "\n")
        return run_dir

    return start_from
