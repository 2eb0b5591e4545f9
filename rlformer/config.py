"""Typed, validated run configuration.

A run is described by one YAML file validated into :class:`TrainConfig`. Every field has a default
that runs and a one-line description (shown by ``rlformer config-doc``); an unknown key, a value
of the wrong type or one out of range is a :class:`ConfigError` naming the key path, the bad
value and what is allowed. ``--set a.b=1`` overrides are applied to the raw mapping *before*
validation, so they obey exactly the same rules as the file.

Example:
    >>> cfg = load_config(None, ["ppo.learning_rate=1e-3", "env.id=CartPole-v1"])
    >>> cfg.ppo.learning_rate
    0.001
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from rlformer.core.config import CoreConfig
from rlformer.presets import UnknownPresetError, apply_preset


class ConfigError(ValueError):
    """A configuration problem, phrased for the user (one line per problem, no traceback)."""


class StrictModel(BaseModel):
    """Base for config sections: unknown keys are errors, assignments are re-validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


_IMPORT_PATH = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"


class WrapperConfig(StrictModel):
    """One wrapper applied to every env: ``{class: module:Class, kwargs: {...}}``."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, populate_by_name=True, serialize_by_alias=True
    )

    cls: str = Field(
        alias="class",
        pattern=_IMPORT_PATH,
        description="Wrapper as module:Class, e.g. minigrid.wrappers:ImgObsWrapper.",
    )
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments of the wrapper (after the env)."
    )
    unwrapped: bool = Field(
        False,
        description="Wrap the bare env (inside gymnasium.make's time limit), as popgym's "
        "wrappers require; only for the first wrappers of the list.",
    )


class EnvConfig(StrictModel):
    """Which Gymnasium task to run."""

    id: str = Field(
        "CartPole-v1",
        description="Gymnasium env id (CartPole-v1, rlformer/TMaze-v0) or module:EnvId.",
    )
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments passed to gymnasium.make."
    )
    max_episode_steps: int | None = Field(
        None, ge=1, description="Override the env's time limit (null keeps the registered one)."
    )
    imports: list[str] = Field(
        default_factory=list,
        description="Modules imported first to register envs, e.g. [popgym, minigrid, mypkg].",
    )
    wrappers: list[WrapperConfig] = Field(
        default_factory=list,
        description="Wrappers applied in order: [{class: module:Class, kwargs: {...}}, ...]; "
        "unwrapped: true wraps the bare env (popgym's wrappers need it; first in the list only).",
    )

    @field_validator("wrappers")
    @classmethod
    def _unwrapped_first(cls, wrappers: list[WrapperConfig]) -> list[WrapperConfig]:
        flags = [w.unwrapped for w in wrappers]
        if any(later and not earlier for earlier, later in zip(flags, flags[1:], strict=False)):
            raise ValueError(
                "wrappers with unwrapped: true must come first (they wrap the bare env)"
            )
        return wrappers


class RolloutConfig(StrictModel):
    """How experience is collected: in-process vector envs or Ray actors."""

    backend: Literal["local", "ray"] = Field(
        "local", description="local: vector envs in this process; ray: one Ray actor per worker."
    )
    num_workers: int = Field(
        1, ge=1, description="Rollout workers (Ray actors, or in-process groups)."
    )
    envs_per_worker: int = Field(
        8, ge=1, description="Environments stepped together by each worker."
    )
    fragment_length: int = Field(
        128, ge=1, description="Steps per env slot in one fragment; also the PPO training sequence."
    )
    ray_address: str | None = Field(
        None,
        description="null starts an embedded local Ray; 'auto' or 'host:port' joins a cluster.",
    )
    worker_cpus: float = Field(
        0.5,
        gt=0,
        description="CPUs reserved per Ray actor (fractional so small machines never stall).",
    )
    max_worker_restarts: int = Field(
        3,
        ge=0,
        description="Dead Ray workers replaced per run before training stops with an error.",
    )
    sample_timeout_s: float = Field(
        300.0,
        gt=0,
        description="Seconds to wait for one fragment before treating its worker as dead.",
    )
    ray_runtime_env: dict[str, Any] | None = Field(
        None,
        description="Ray runtime_env for the workers, e.g. {py_modules: [./mypkg]} on a cluster.",
    )
    async_sampling: bool = Field(
        False,
        description="Ray backend, PPO: workers sample the next fragment with the previous "
        "weights while the learner updates (one policy version of lag; faster where sampling "
        "and updating each take a core).",
    )

    @model_validator(mode="after")
    def _async_needs_ray(self) -> RolloutConfig:
        if self.async_sampling and self.backend != "ray":
            raise ValueError(
                "async_sampling needs backend=ray (--set rollout.backend=ray): the workers must "
                "run in their own processes to sample while the learner updates"
            )
        return self


class ModelConfig(StrictModel):
    """The actor-critic network: a torso (GTrXL core or MLP) plus policy and value heads."""

    torso: Literal["gtrxl", "lstm", "gru", "mlp"] = Field(
        "gtrxl",
        description="gtrxl: memory-enabled attention core; lstm / gru: recurrent baselines; "
        "mlp: memoryless baseline.",
    )
    core: CoreConfig = Field(
        default_factory=lambda: _ppo_core(),  # defined below, with the DT's
        description="Attention core settings (precision defaults to fp32 for PPO, see below).",
    )
    shared_torso: bool = Field(
        True, description="Actor and critic share one torso (false: two separate torsos)."
    )
    mlp_hidden: list[int] = Field(
        default_factory=lambda: [64, 64], description="Hidden sizes of the MLP torso."
    )
    recurrent_hidden: int = Field(
        128, ge=1, description="Hidden size of the lstm / gru torso (and its input embedding)."
    )
    recurrent_layers: int = Field(1, ge=1, description="Stacked layers of the lstm / gru torso.")
    log_std_init: float = Field(0.0, description="Initial log std of the Gaussian action head.")
    cnn: Literal["nature", "impala"] = Field(
        "nature",
        description="Encoder of image leaves (uint8 HWC/CHW): Nature-DQN CNN or IMPALA ResNet.",
    )
    cnn_features: int = Field(
        512, ge=1, description="Features out of each image encoder (SB3 and Nature-DQN: 512)."
    )
    image_scale: float = Field(
        255.0,
        gt=0,
        description="uint8 image leaves are divided by this before the CNN: 255 for camera "
        "pixels; the largest code for symbolic grids (MiniGrid: 10), which /255 squashes to "
        "at most 0.04.",
    )
    prev_action_reward: bool = Field(
        False, description="Feed the previous action and reward into each token (0 at resets)."
    )
    normalize_obs: bool = Field(
        False, description="Running mean/std normalisation of vector observation leaves."
    )
    normalize_reward: bool = Field(
        True,
        description="Scale rewards by the std of a running discounted return (VecNormalize). "
        "On by default: without it the defaults learned neither Acrobot-v1 nor Pendulum-v1 in "
        "100k steps (docs/BENCHMARKS.md, 'Defaults on fully observed tasks').",
    )
    normalize_gamma: float = Field(
        0.99, ge=0, le=1, description="Discount of the return whose std scales rewards."
    )
    normalize_clip: float = Field(
        10.0, gt=0, description="Normalised observations and scaled rewards are clipped to +-this."
    )

    @field_validator("core", mode="before")
    @classmethod
    def _ppo_defaults_under_overrides(cls, value: Any) -> Any:
        # A partial `model.core` section overrides the PPO defaults, not CoreConfig's generic ones.
        if isinstance(value, dict):
            return {**_ppo_core().model_dump(exclude_unset=True), **value}
        return value

    @model_validator(mode="after")
    def _fp32_unless_asked(self) -> ModelConfig:
        # CPU rollout workers run fp32; a CUDA learner under bf16 autocast would compute
        # log-probs ~1e-2 off and break PPO's ratio = 1. Only an explicit choice overrides this.
        if "precision" not in self.core.model_fields_set:
            self.core.precision = "fp32"
        return self


class PPOConfig(StrictModel):
    """Proximal Policy Optimisation hyper-parameters (defaults follow common PPO settings)."""

    total_steps: int = Field(100_000, ge=1, description="Environment steps to train for.")
    learning_rate: float = Field(3e-4, gt=0, description="Adam learning rate.")
    anneal_lr: bool = Field(True, description="Linearly decay the learning rate to 0.")
    gamma: float = Field(0.99, ge=0, le=1, description="Discount factor.")
    gae_lambda: float = Field(0.95, ge=0, le=1, description="GAE lambda.")
    clip_coef: float = Field(0.2, gt=0, description="PPO ratio clip range.")
    clip_value: bool = Field(True, description="Clip the value update around the old value.")
    ent_coef: float = Field(0.01, ge=0, description="Entropy bonus weight.")
    vf_coef: float = Field(0.5, ge=0, description="Value loss weight.")
    max_grad_norm: float = Field(0.5, gt=0, description="Global gradient-norm clip.")
    update_epochs: int = Field(4, ge=1, description="Passes over each batch.")
    num_minibatches: int = Field(
        4, ge=1, description="Minibatches per epoch (split over env slots)."
    )
    norm_adv: bool = Field(True, description="Normalise advantages per minibatch.")
    memory_gradient_steps: int = Field(
        0,
        ge=0,
        description="B > 0: recompute the B steps before each training sequence with gradient, "
        "so the loss reaches the memory it reads (costs B extra steps per sequence; at most "
        "rollout.fragment_length). 0: rollout memory, no gradient.",
    )
    target_kl: float | None = Field(
        None,
        gt=0,
        description="Stop the epoch loop early when approx KL exceeds this (null: never).",
    )
    decoupled_clip: bool = Field(
        True,
        description="Batches from older weights (rollout.async_sampling): clip the ratio around "
        "the weights the update starts from, importance-weighted by their ratio to the "
        "behaviour policy (decoupled PPO); false: clip around the behaviour policy.",
    )


class EvalConfig(StrictModel):
    """Evaluation at the end of training, and optionally during it (SB3's EvalCallback)."""

    episodes: int = Field(20, ge=0, description="Episodes for the final evaluation (0 skips it).")
    deterministic: bool = Field(
        True,
        description="Greedy / mean actions during evaluation (false: sampled; Decision "
        "Transformers sample only as online DTs or with discrete actions).",
    )
    num_envs: int = Field(8, ge=1, description="Vector envs used for evaluation.")
    every: int = Field(
        0,
        ge=0,
        description="Also evaluate every N iterations while training (0: only at the end; an "
        "iteration is one PPO rollout and update, dt.log_every DT gradient steps or one ODT "
        "collection); logged as periodic_eval/*, the best weights kept in checkpoints/best.pt "
        "(DT: by the first target's return).",
    )
    every_episodes: int = Field(
        10,
        ge=1,
        description="Episodes per evaluation during training: the same seeds each time, none "
        "shared with the final evaluation, so choosing best.pt does not tune on the final score.",
    )


class RunConfig(StrictModel):
    """Where and how a run is recorded."""

    name: str = Field("run", min_length=1, description="Run name; the directory is NAME-TIMESTAMP.")
    root: str = Field("runs", description="Folder that holds run directories.")
    seed: int = Field(0, ge=0, description="Seed for envs, action sampling and initialisation.")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto",
        description="Learner device: auto picks cuda when available. PPO models under 100k "
        "parameters without an image encoder measured faster on the CPU (docs/BENCHMARKS.md).",
    )
    torch_threads: int = Field(1, ge=1, description="torch intra-op threads for the learner.")
    checkpoint_every: int = Field(10, ge=1, description="Write a checkpoint every N iterations.")
    keep_checkpoints: int = Field(3, ge=1, description="Checkpoints kept on disk (oldest deleted).")
    progress: bool = Field(True, description="Show a progress bar (plain lines when not a TTY).")
    nonfinite: Literal["stop", "skip"] = Field(
        "stop",
        description="NaN/inf loss or gradient: stop the run, or skip that update (counted).",
    )


def _ppo_core() -> CoreConfig:
    # The PPO defaults, from the sweeps and runs in docs/BENCHMARKS.md: one layer (memory is
    # carried between fragments without gradient, so a second layer cannot learn to relay a cue
    # through the first one's memory: T-Maze L=100 58% with two layers, 100% with one), gate
    # bias 0 (b_g = 2 kept every gate at chance on POPGym RepeatPrevious and CartPole without
    # velocities at 145 against 499), width 64 with 4 heads and an MLP of 128 (the POPGym configs).
    return CoreConfig(n_layers=1, d_model=64, n_heads=4, d_ff=128, memory_length=64, gate_bias=0.0)


def _dt_core() -> CoreConfig:
    # Published DT gym setup: 3 layers, 1 head, width 128, dropout 0.1; window covers 3K tokens.
    # No positional scheme: like the original DT, order comes from the timestep embedding
    # (added to all three tokens of a step) and the causal mask; transformers' DT passes all-zero
    # position ids, the same thing. It also trains 7-14% faster than relative attention (no
    # position term, boolean mask).
    return CoreConfig(
        n_layers=3,
        n_heads=1,
        d_model=128,
        d_ff=512,
        dropout=0.1,
        memory_length=60,
        positional="none",
        block="trxl_i",
        precision="auto",
    )


class DTConfig(StrictModel):
    """Decision Transformer (offline) settings; defaults follow the published gym setup."""

    dataset: str = Field(
        "dataset.hdf5", description="d4rl:FILE, minari:ID or an rlformer recording (see collect)."
    )
    context: int = Field(20, ge=1, description="K: steps per training window.")
    return_scale: float = Field(1000.0, gt=0, description="Returns-to-go are divided by this.")
    core: CoreConfig = Field(default_factory=_dt_core, description="Attention core of the DT.")
    max_timestep: int = Field(4096, ge=1, description="Size of the timestep embedding table.")
    batch_size: int = Field(64, ge=1, description="Windows per gradient step.")
    learning_rate: float = Field(1e-4, gt=0, description="AdamW learning rate.")
    weight_decay: float = Field(1e-4, ge=0, description="AdamW weight decay.")
    warmup_steps: int = Field(10_000, ge=0, description="Linear learning-rate warm-up steps.")
    max_grad_norm: float = Field(0.25, gt=0, description="Global gradient-norm clip.")
    train_steps: int = Field(10_000, ge=1, description="Gradient steps to train for.")
    log_every: int = Field(100, ge=1, description="Log metrics every N gradient steps.")
    memory_segments: int = Field(
        0,
        ge=0,
        description="0: plain DT; n > 0: train on n consecutive K-step windows carrying memory.",
    )
    target_returns: list[float] = Field(
        default_factory=lambda: [100.0], description="Target returns for the final evaluation."
    )
    act_context: int | None = Field(
        None,
        ge=1,
        description="Steps of history a plain DT looks at when acting (evaluation and ODT "
        "rollouts), at most dt.context; null: dt.context. The ODT paper trains on K = 20 "
        "windows and acts on the last 5 steps on its gym tasks.",
    )

    @model_validator(mode="after")
    def _act_context_fits(self) -> DTConfig:
        if self.act_context is None:
            return self
        if self.act_context > self.context:
            raise ValueError(
                f"act_context ({self.act_context}) is longer than the training windows "
                f"(context {self.context}); set act_context <= context"
            )
        if self.memory_segments > 0:
            raise ValueError(
                "act_context is for a plain DT: a memory DT (memory_segments > 0) acts on whole "
                "K-step windows as it was trained; unset one of them"
            )
        return self

    @field_validator("core", mode="before")
    @classmethod
    def _dt_defaults_under_overrides(cls, value: Any) -> Any:
        # A partial `dt.core` section overrides the DT defaults, not CoreConfig's generic ones.
        if isinstance(value, dict):
            return {**_dt_core().model_dump(), **value}
        return value


class ODTConfig(StrictModel):
    """Online Decision Transformer settings (``algo: odt``); the network, context, batch and
    optimiser are ``dt``'s. Defaults are those of the ODT paper's gym setup (Zheng et al. 2022)
    except where a description says otherwise."""

    init_from: str | None = Field(
        None,
        description="DT or ODT checkpoint (file or run directory) to fine-tune, read when the "
        "run starts (a resumed run needs only its own checkpoints); null: pretrain on "
        "dt.dataset for odt.pretrain_steps first.",
    )
    pretrain_steps: int = Field(
        5000, ge=0, description="Offline gradient steps before going online (paper: 5000)."
    )
    online_steps: int = Field(
        200_000,
        ge=0,
        description="Env steps collected online (paper: up to 1M; a CPU-sized default here); 0 "
        "stops after pretraining (a DT with ODT's stochastic head and loss, to fine-tune later "
        "by resuming with more online steps).",
    )
    updates_per_iteration: int = Field(
        300, ge=1, description="Gradient steps on the replay buffer after each collection."
    )
    replay_size: int = Field(
        1000,
        ge=1,
        description=(
            "Trajectories in the FIFO replay buffer (seeded with the best offline ones); a "
            "resumed run may change it only while the buffer holds no online trajectories yet."
        ),
    )
    exploration_return: float | None = Field(
        None,
        description="Target return the rollouts are conditioned on; null: twice the largest "
        "dt.target_returns (the paper's ratio, e.g. 7200 vs 3600 on Hopper).",
    )
    init_temperature: float = Field(0.1, gt=0, description="Initial entropy weight alpha.")
    temperature_learning_rate: float = Field(
        1e-4, gt=0, description="Adam learning rate of log(alpha)."
    )
    target_entropy: float | None = Field(
        None,
        description="Entropy alpha steers toward; null: -action dimension (continuous, paper) "
        "or 0.3*ln(n) for n discrete actions (rlformer's choice).",
    )


class TrainConfig(StrictModel):
    """Everything one ``rlformer train`` run needs."""

    algo: Literal["ppo", "dt", "odt"] = Field(
        "ppo",
        description="ppo: online GTrXL-PPO; dt: offline Decision Transformer; odt: Online "
        "Decision Transformer (DT fine-tuned on its own rollouts).",
    )
    preset: str | None = Field(
        "auto",
        description="Tuned settings of a task family laid under a loaded config: popgym, "
        "minigrid, cartpole-novel, pendulum-novel, lunarlander-novel, mujoco, auto (by env.id, "
        "PPO only) or null (none); the config's keys and --set win. For dt and odt a named "
        "preset sets only the env section (imports, wrappers).",
    )
    run: RunConfig = Field(default_factory=RunConfig, description="Run directory, seed, device.")
    env: EnvConfig = Field(default_factory=EnvConfig, description="Environment.")
    rollout: RolloutConfig = Field(
        default_factory=RolloutConfig, description="Experience collection."
    )
    model: ModelConfig = Field(default_factory=ModelConfig, description="Network.")
    ppo: PPOConfig = Field(default_factory=PPOConfig, description="PPO learner.")
    eval: EvalConfig = Field(default_factory=EvalConfig, description="Final evaluation.")
    dt: DTConfig = Field(default_factory=DTConfig, description="Decision Transformer learner.")
    odt: ODTConfig = Field(default_factory=ODTConfig, description="Online Decision Transformer.")

    @model_validator(mode="after")
    def _async_sampling_is_ppo(self) -> TrainConfig:
        if self.rollout.async_sampling and self.algo != "ppo":
            raise ValueError(
                f"rollout.async_sampling is for algo ppo only, not {self.algo}; remove it"
            )
        return self

    @model_validator(mode="after")
    def _minibatches_fit(self) -> TrainConfig:
        if self.algo != "ppo":
            return self  # other algorithms do not split rollouts into minibatches
        if self.ppo.memory_gradient_steps > self.rollout.fragment_length:
            raise ValueError(
                f"ppo.memory_gradient_steps={self.ppo.memory_gradient_steps} exceeds "
                f"rollout.fragment_length={self.rollout.fragment_length}; the steps recomputed "
                "with gradient come from the previous fragment"
            )
        slots = self.rollout.num_workers * self.rollout.envs_per_worker
        if self.ppo.num_minibatches > slots:
            raise ValueError(
                f"ppo.num_minibatches={self.ppo.num_minibatches} exceeds the "
                f"{slots} env slots (rollout.num_workers x rollout.envs_per_worker); "
                "minibatches split whole sequences, so use at most that many"
            )
        return self


def _parse_yaml(text: str) -> Any:
    """``yaml.safe_load`` whose every failure is a one-line ValueError.

    PyYAML raises more than YAMLError: a date-like scalar that is no date (``2001-13-45``)
    escapes as a bare ValueError from ``datetime``, and very deep nesting as RecursionError.
    """
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ValueError(" ".join(str(err).split()) or type(err).__name__) from None
    except (ValueError, OverflowError, RecursionError) as err:
        raise ValueError(f"{type(err).__name__}: {err}") from None


def parse_override(item: str) -> tuple[list[str], Any]:
    """Split ``a.b=value`` into a key path and a YAML-typed value (``null`` -> None)."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(
            f"--set {item!r}: expected KEY.PATH=VALUE, e.g. --set ppo.learning_rate=1e-3"
        )
    try:
        value = _parse_yaml(raw) if raw.strip() else ""
    except ValueError as err:
        raise ConfigError(f"--set {item!r}: value is not valid YAML ({err})") from None
    return key.strip().split("."), value


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return ``raw`` with each ``a.b=value`` override set (intermediate mappings are created)."""
    for item in overrides:
        path, value = parse_override(item)
        node = raw
        for depth, part in enumerate(path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                prefix = ".".join(path[: depth + 1])
                raise ConfigError(f"--set {item!r}: {prefix} is a value, not a section")
            node = child
        node[path[-1]] = value
    return raw


def format_validation_error(err: ValidationError) -> str:
    """One line per problem: ``key.path: got VALUE; what is allowed``."""
    lines = []
    for problem in err.errors():
        path = ".".join(str(p) for p in problem["loc"]) or "<top level>"
        message = problem["msg"]
        if problem["type"] == "extra_forbidden":
            lines.append(
                f"{path}: unknown key (check spelling; `rlformer config-doc` lists all keys)"
            )
            continue
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if problem["type"] in ("bool_parsing", "bool_type"):
            message = "expected true or false"
        got = problem.get("input")
        shown = "" if isinstance(got, dict) else f"got {got!r}; "
        lines.append(f"{path}: {shown}{message}")
    return "\n".join(lines)


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping, turning file and syntax problems into :class:`ConfigError`."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        data = _parse_yaml(path.read_text())
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (YAML must be UTF-8)") from None
    except ValueError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror or err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: top level must be a mapping of sections, got {type(data).__name__}"
        )
    return data


# Per algorithm, the sections (or single keys) it never reads, and what they configure instead.
_UNREAD_PATHS: dict[str, dict[str, str]] = {
    "ppo": {
        "dt": "it configures the Decision Transformers, algo dt and odt",
        "odt": "it configures the online Decision Transformer, algo odt",
    },
    "dt": {
        "model": "a Decision Transformer's network is dt.core",
        "ppo": "it configures PPO",
        "rollout": "an offline DT collects no rollouts",
        "odt": "it configures the online Decision Transformer, algo odt",
    },
    "odt": {
        "model": "a Decision Transformer's network is dt.core",
        "ppo": "it configures PPO",
        "rollout.fragment_length": "an online DT collects whole episodes",
    },
}


def _changed_keys(values: dict[str, Any], defaults: dict[str, Any], prefix: str) -> list[str]:
    """Dotted keys whose value differs from the default, depth first."""
    changed = []
    for key, value in values.items():
        default = defaults.get(key)
        if isinstance(value, dict) and isinstance(default, dict):
            changed += _changed_keys(value, default, f"{prefix}{key}.")
        elif value != default:
            changed.append(f"{prefix}{key}")
    return changed


def _refuse_unread(algo: str, key: str) -> None:
    """ConfigError if ``algo`` never reads the dotted ``key``."""
    for path, instead in _UNREAD_PATHS[algo].items():
        if key == path:
            raise ConfigError(
                f"{key} is set, but algo {algo} never reads it ({instead}); remove it"
            )
        if key.startswith(f"{path}.") and "." not in path:
            raise ConfigError(
                f"{key} is set, but algo {algo} never reads the {path} section ({instead}); "
                "remove it"
            )


def check_sections_read(cfg: TrainConfig) -> None:
    """Refuse a key that the chosen algorithm would ignore, such as ``model.core.n_layers`` for a
    DT (its network is ``dt.core``), instead of training something other than what was asked.

    A key counts as set when its value differs from the algorithm's default.
    """
    values = cfg.model_dump(mode="json")
    defaults = TrainConfig(algo=cfg.algo).model_dump(mode="json")
    for section in dict.fromkeys(path.partition(".")[0] for path in _UNREAD_PATHS[cfg.algo]):
        for key in _changed_keys(values[section], defaults[section], f"{section}."):
            _refuse_unread(cfg.algo, key)


def build_config(raw: dict[str, Any], check_unread: bool = True) -> TrainConfig:
    """Validate a raw mapping, laid over the preset it names, into a :class:`TrainConfig` or
    raise :class:`ConfigError` (with ``check_unread``, also for keys the algorithm ignores)."""
    try:
        raw = apply_preset(raw)
    except UnknownPresetError as err:
        raise ConfigError(str(err)) from None
    try:
        cfg = TrainConfig.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err)) from None
    if check_unread:
        check_sections_read(cfg)
    return cfg


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> TrainConfig:
    """Load ``path`` (or the defaults when None), apply ``--set`` overrides and validate."""
    raw = read_yaml(path) if path is not None else {}
    return build_config(apply_overrides(raw, list(overrides or [])))


def offline_env_config(path: str | Path | None, overrides: list[str] | None = None) -> EnvConfig:
    """The env that a DT or ODT run of ``path`` plus ``overrides`` would build.

    ``rlformer collect --config/--set`` records data through it, so the data fits the DT that
    trains on it: ``preset: auto`` adds nothing for offline algorithms, a named preset only its
    env section. The file may be a PPO config; its other sections are not read.
    """
    raw = read_yaml(path) if path is not None else {}
    raw = apply_overrides({**raw, "algo": "dt"}, list(overrides or []))
    return build_config(raw, check_unread=False).env


def load_saved_config(path: str | Path, overrides: list[str] | None = None) -> TrainConfig:
    """A run directory's resolved config plus ``--set`` overrides, for ``--resume``.

    The saved config is taken as it is: it was checked when the run started, and it lists every
    section, including those the algorithm never read at their defaults of that time. Only the
    overrides are checked for keys the algorithm ignores.
    """
    cfg = build_config(apply_overrides(read_yaml(path), list(overrides or [])), False)
    for item in overrides or []:
        _refuse_unread(cfg.algo, ".".join(parse_override(item)[0]))
    return cfg


def dump_config(cfg: TrainConfig) -> str:
    """The fully resolved config as YAML, suitable to re-load with :func:`load_config`."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)


def describe_fields(
    model: type[BaseModel] = TrainConfig, prefix: str = "", defaults: BaseModel | None = None
) -> list[tuple[str, str, str]]:
    """Every leaf key as ``(path, default, description)``, for ``rlformer config-doc``.

    Defaults are read from the parent's default instance, not from the nested class, because a
    section may override its class's defaults (``dt.core`` is a 3-layer DT core, not a
    generic ``CoreConfig``).
    """
    rows: list[tuple[str, str, str]] = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        default = (
            getattr(defaults, name)
            if defaults is not None
            else field.get_default(call_default_factory=True)
        )
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows.extend(describe_fields(annotation, prefix=f"{path}.", defaults=default))
            continue
        rows.append((path, repr(default), field.description or ""))
    return rows


def reference_lines() -> list[str]:
    """``rlformer config-doc``'s lines (also the body of docs/CONFIG.md)."""
    return [f"{path:32s} {default:14s} {doc}" for path, default, doc in describe_fields()]
