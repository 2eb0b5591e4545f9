"""Decision Transformers (plain, memory and online) as a :class:`~rlformer.policies.Policy`.

Bookkeeping per row, as in the DT paper: an episode starts with ``R_0 = target``; after reward
r_t the next step is conditioned on ``R_{t+1} = R_t - r_t`` (divided by the return scale for the
model). The state is the row's context window, explicit data like every policy's state:

* a plain DT looks at the last K steps (left-padded at the episode's start), or at the last
  ``history`` steps when set (the Online DT paper's shorter acting context);
* a memory DT fills windows of K steps aligned to the episode start and, when a window is
  complete, carries the core's memory of it into the next window: exactly how it was trained.

Observations of any space rlformer encodes are kept as the model reads them
(:class:`~rlformer.networks.dt_spaces.StateLayout`), and actions of any action space are chosen by
the head of that space: greedily, or sampled from its distribution.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from rlformer.core import Memory
from rlformer.moved_paths import moved_name
from rlformer.networks.decision_transformer import DecisionTransformer, DTOutput
from rlformer.networks.distributions import mask_logits
from rlformer.networks.dt_spaces import StateLayout, action_bounds, env_actions
from rlformer.networks.spaces import Tree, flatten_obs, tree_map, tree_stack
from rlformer.policies.base import PolicyDistribution, PolicyInfo

__all__ = [
    "DTContext",
    "DTPolicy",
    "DTStep",
    "action_bounds",
    "sampling_problem",
]


@dataclass
class DTContext:
    """Each row's context: the steps of its current window and what conditions the next one.

    Window entries are what the model reads: normalised states (one array, or a dict of leaves:
    :class:`~rlformer.networks.dt_spaces.StateLayout`), model-space actions (indices, bits, or
    [-1, 1] when continuous), returns-to-go (unscaled), episode timesteps; ``valid`` marks real
    steps (padding is zero).
    """

    states: Tree  # [n, W, state_dim] float32, or per leaf [n, W, *leaf]
    actions: np.ndarray  # [n, W] (discrete), [n, W, components] or [n, W, act_dim], float32
    returns_to_go: np.ndarray  # [n, W] float32
    timesteps: np.ndarray  # [n, W] int64
    valid: np.ndarray  # [n, W] bool
    step: np.ndarray  # [n] int64: steps the row's episode has taken
    last_return: np.ndarray  # [n] float32: R_t of the row's last step
    target: np.ndarray  # [n] float32: the return each row's episodes aim for
    memory: Memory | None  # memory DT: the core's memory of the row's completed windows

    @classmethod
    def cat(cls, contexts: list[DTContext]) -> DTContext:
        """The rows of ``contexts`` as one batch (a memory DT's rows all hold a memory)."""
        memories = [c.memory for c in contexts]
        arrays = {
            f.name: tree_stack([getattr(c, f.name) for c in contexts], np.concatenate)
            for f in fields(cls)
            if f.name != "memory"
        }
        return cls(**arrays, memory=None if memories[0] is None else Memory.cat(memories))  # type: ignore[arg-type]

    def index(self, rows: slice) -> DTContext:
        """Rows ``rows``, with arrays of their own (not views of this batch's)."""
        arrays = {
            f.name: tree_map(lambda a: a[rows].copy(), getattr(self, f.name))
            for f in fields(self)
            if f.name != "memory"
        }
        return DTContext(**arrays, memory=None if self.memory is None else self.memory.index(rows))


class DTStep(NamedTuple):
    """One step of a DT policy: env-format actions, the same actions in the model's space (what
    a trajectory buffer stores), the rows' next context, and the model's prediction at each
    row's step (logits, or the [-1, 1] action when continuous); an online DT's Gaussian (mean
    and log-std before tanh) at each row's step."""

    env_actions: np.ndarray
    model_actions: np.ndarray
    state: DTContext
    prediction: torch.Tensor
    gaussian: tuple[torch.Tensor, torch.Tensor] | None = None


@dataclass
class DTPolicy:
    """A trained DT plus everything needed to feed it: normalisation, return scale, context."""

    model: DecisionTransformer
    state_mean: np.ndarray
    state_std: np.ndarray
    return_scale: float
    context: int
    carry_memory: bool
    action_low: np.ndarray | None = None  # continuous actions are trained in [-1, 1]
    action_high: np.ndarray | None = None
    history: int | None = None  # plain DT: steps each action looks at (None: context)
    info: PolicyInfo | None = None
    observation_space: gym.Space | None = None
    action_space: gym.Space | None = None
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    layout: StateLayout = field(init=False)

    def __post_init__(self) -> None:
        # A model without an encoder reads flat vectors, whatever the space (DTs built in code,
        # and checkpoints whose statistics cover a whole Discrete or image observation).
        flat = getattr(self.model, "encoder", None) is None
        self.layout = StateLayout(None if flat else self.observation_space, flat=flat)

    def to(self, device: torch.device | str) -> DTPolicy:
        """Act on ``device``: the model runs there, the context stays in NumPy on the host and
        actions come back to it, so a large DT evaluates on a GPU while the envs step on the CPU.
        Sampling still draws from the caller's CPU generator (the same actions as on the CPU)."""
        self.device = torch.device(device)
        self.model.to(self.device)
        return self

    @property
    def window(self) -> int:
        """Steps fed to the model at each action."""
        return self.context if self.carry_memory or self.history is None else self.history

    def to_env_action(self, prediction: np.ndarray) -> np.ndarray:
        """The greedy env action of a Box or Discrete head's prediction."""
        if self.model.discrete:
            return env_actions(prediction.argmax(-1), self.action_space)
        if self.action_low is None or self.action_high is None:
            return prediction
        return self.action_low + (prediction + 1.0) * 0.5 * (self.action_high - self.action_low)

    def normalize_action(self, action: np.ndarray) -> np.ndarray:
        if self.model.discrete or self.action_low is None or self.action_high is None:
            return action
        return 2.0 * (action - self.action_low) / (self.action_high - self.action_low) - 1.0

    def set_act_context(self, steps: int) -> None:
        """Act on the last ``steps`` steps (a plain DT, at most its training context)."""
        name = self.info.name if self.info is not None else "this DT"
        if self.carry_memory:
            raise ValueError(f"{name} is a memory DT, which acts on whole windows")
        if steps > self.context:
            raise ValueError(
                f"{steps} steps is longer than {name}'s training context ({self.context}); "
                f"give at most {self.context}"
            )
        self.history = steps

    # ------------------------------------------------------------------ Policy
    def initial_row_state(self, target_return: float | None = None) -> DTContext:
        """One row's state for a server that batches rows of any age: a memory DT's rows hold
        the core's memory from their first step (all slots invalid: the same outputs as no
        memory), so that rows concatenate and a sealed state always has the same shapes."""
        state = self.initial_state(1, target_return=target_return)
        if self.carry_memory and state.memory is None:
            state.memory = self.model.initial_memory(1, "cpu")
        return state

    def initial_state(self, n: int, target_return: float | None = None) -> DTContext:
        if target_return is None:
            targets = self.info.default_targets if self.info is not None else []
            if not targets:
                raise ValueError("a Decision Transformer needs a target return to act")
            target_return = targets[0]
        model, w = self.model, self.window
        action_shape = {
            "discrete": (n, w),
            "multidiscrete": (n, w, len(model.action_nvec)),
        }.get(_kind(model), (n, w, model.act_dim))
        states = (
            np.zeros((n, w, model.state_dim), np.float32)
            if self.layout.flat
            else self.layout.zeros((n, w))
        )
        return DTContext(
            states=states,
            actions=np.zeros(action_shape, np.float32),
            returns_to_go=np.zeros((n, w), np.float32),
            timesteps=np.zeros((n, w), np.int64),
            valid=np.zeros((n, w), bool),
            step=np.zeros(n, np.int64),
            last_return=np.zeros(n, np.float32),
            target=np.full(n, target_return, np.float32),
            memory=None,
        )

    def act(
        self,
        obs: Any,
        state: DTContext,
        episode_start: np.ndarray,
        reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None,
        deterministic: bool = True,
        generator: torch.Generator | None = None,
    ) -> tuple[np.ndarray, DTContext]:
        if deterministic:
            generator = None
        elif generator is None:
            generator = torch.default_generator
        step = self.step(obs, state, episode_start, reward, action_mask, generator)
        return step.env_actions, step.state

    @torch.no_grad()
    def step(
        self,
        obs: Any,
        state: DTContext,
        episode_start: np.ndarray,
        reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None,
        generator: torch.Generator | None = None,
    ) -> DTStep:
        """Act on every row; sample with ``generator`` (an ODT's exploration), else play the
        most likely action."""
        model = self.model.eval()
        starts = np.asarray(episode_start, dtype=bool)
        state = self._begin_step(obs, state, starts, reward)
        position = self._position(state.step)
        out = model(*self._tensors(state), self._valid(state), memory=state.memory)
        rows = torch.arange(len(position), device=self.device)
        at = torch.as_tensor(position, device=self.device)
        chosen, env_actions = self._choose(out, rows, at, action_mask, generator)
        state.actions[np.arange(len(position)), position] = chosen
        if self.carry_memory:
            state = self._carry_memory(state, position == self.window - 1)
        state.step = state.step + 1
        gaussian = None
        if out.action_mean is not None and out.action_log_std is not None:
            gaussian = (
                out.action_mean[rows, at].float().cpu(),
                out.action_log_std[rows, at].float().cpu(),
            )
        prediction = out.action_preds[rows, at].float().cpu()
        return DTStep(env_actions, chosen, state, prediction, gaussian)

    def distribution(
        self,
        obs: Any,
        state: DTContext,
        episode_start: np.ndarray,
        reward: np.ndarray | None = None,
        action_mask: np.ndarray | None = None,
    ) -> PolicyDistribution:
        step = self.step(obs, state, episode_start, reward, action_mask)
        preds, kind = step.prediction, _kind(self.model)
        if action_mask is not None:
            preds = mask_logits(preds, torch.as_tensor(action_mask))
        if kind == "box":
            if step.gaussian is None:
                return PolicyDistribution("deterministic", step.state, mean=preds.numpy())
            mean, log_std = (part.numpy() for part in step.gaussian)
            return PolicyDistribution("tanh_gaussian", step.state, mean=mean, log_std=log_std)
        if kind == "multibinary":
            return PolicyDistribution("bernoulli", step.state, logits=(preds.numpy(),))
        sizes = list(self.model.action_nvec) if kind == "multidiscrete" else [preds.shape[-1]]
        logits = tuple(part.numpy() for part in preds.split(sizes, dim=-1))
        return PolicyDistribution("categorical", step.state, logits=logits)

    # ------------------------------------------------------------------ internals
    def _position(self, step: np.ndarray) -> np.ndarray:
        """Where each row's current step sits in its window."""
        if self.carry_memory:
            return step % self.window
        return np.full(step.shape, self.window - 1)

    def _begin_step(
        self, obs: Any, state: DTContext, starts: np.ndarray, reward: np.ndarray | None
    ) -> DTContext:
        """The context with this step's state and return-to-go in place (action still 0)."""
        n = len(starts)
        state = replace(
            state,
            states=tree_map(np.copy, state.states),
            actions=state.actions.copy(),
            returns_to_go=state.returns_to_go.copy(),
            timesteps=state.timesteps.copy(),
            valid=state.valid.copy(),
            step=np.where(starts, 0, state.step),
        )
        if starts.any():
            _set(state.states, starts, 0)
            state.actions[starts] = 0.0
            state.returns_to_go[starts] = 0.0
            state.timesteps[starts] = 0
            state.valid[starts] = False
            if state.memory is not None:
                state.memory = state.memory.reset(torch.as_tensor(starts, device=self.device))
        if not starts.all() and reward is None:
            raise ValueError("a return-conditioned policy needs the reward of its last action")
        returns = np.zeros(n, np.float32)
        returns[:] = state.target
        if not starts.all():
            assert reward is not None
            rest = ~starts
            returns[rest] = state.last_return[rest] - np.asarray(reward)[rest]
        state.last_return = returns
        normalised = self._normalised(obs, n)
        position = self._position(state.step)
        if self.carry_memory:
            fresh = position == 0  # a new window: the previous one lives on in memory
            _set(state.states, fresh, 0)
            for name, fill in (("actions", 0.0), ("returns_to_go", 0.0)):
                getattr(state, name)[fresh] = fill
            state.timesteps[fresh] = 0
            state.valid[fresh] = False
        else:  # slide the window by one step
            leaves = state.states.values() if isinstance(state.states, dict) else [state.states]
            others = (state.actions, state.returns_to_go, state.timesteps, state.valid)
            for array in (*leaves, *others):
                array[:, :-1] = array[:, 1:].copy()
                array[:, -1] = 0
        rows = np.arange(n)
        _set(state.states, (rows, position), normalised)
        state.actions[rows, position] = 0.0
        state.returns_to_go[rows, position] = returns
        state.timesteps[rows, position] = state.step
        state.valid[rows, position] = True
        return state

    def _normalised(self, obs: Any, n: int) -> Tree:
        """This step's observations of ``n`` rows (as a vector env gives them, or already a
        tree of leaves) as the model reads them."""
        if self.layout.flat:
            raw = np.asarray(obs, np.float32).reshape(n, -1)
            return ((raw - self.state_mean) / self.state_std).astype(np.float32)
        layout = self.layout
        assert layout.space is not None
        is_tree = isinstance(obs, dict) and set(obs) == set(layout.leaves)
        inputs = layout.inputs(obs if is_tree else flatten_obs(layout.space, obs))
        return layout.standardize(inputs, self.state_mean, self.state_std)

    def _tensors(self, state: DTContext) -> tuple[Any, ...]:
        """The model's inputs for the rows' windows, on the policy's device."""
        device = self.device
        actions = torch.as_tensor(state.actions, device=device)
        indices = _kind(self.model) in ("discrete", "multidiscrete")
        return (
            tree_map(lambda leaf: torch.as_tensor(leaf, device=device), state.states),
            actions.long() if indices else actions,
            torch.as_tensor(state.returns_to_go / self.return_scale, device=device)[..., None],
            torch.as_tensor(state.timesteps, device=device),
        )

    def _valid(self, state: DTContext) -> torch.Tensor:
        return torch.as_tensor(state.valid, device=self.device)

    def _choose(
        self,
        out: DTOutput,
        rows: torch.Tensor,
        position: torch.Tensor,
        action_mask: np.ndarray | None,
        generator: torch.Generator | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each row's action at its position: (model space, env space)."""
        model, kind = self.model, _kind(self.model)
        # Chosen on the host: NumPy actions, and the caller's CPU generator for sampling.
        preds = out.action_preds[rows, position].float().cpu()
        if action_mask is not None:
            if kind not in ("discrete", "multidiscrete"):
                raise ValueError(
                    f"action masks apply to Discrete and MultiDiscrete actions, not a {kind} DT"
                )
            preds = mask_logits(preds, torch.as_tensor(action_mask))
        if kind in ("multidiscrete", "multibinary"):
            dist = model.action_distribution
            assert dist is not None
            chosen = dist.sample(preds, generator is None, generator).numpy()
            return chosen.astype(np.float32), env_actions(chosen, self.action_space)
        if generator is None:
            env_action = self.to_env_action(preds.numpy())
            if model.discrete:
                return np.asarray(preds.numpy().argmax(-1)), env_action
            return self.normalize_action(np.asarray(env_action, np.float32)), env_action
        if model.discrete:
            chosen = torch.multinomial(torch.softmax(preds, -1), 1, generator=generator)[:, 0]
            return chosen.numpy(), env_actions(chosen.numpy(), self.action_space)
        if out.action_mean is None or out.action_log_std is None:
            raise ValueError(f"cannot sample actions: {sampling_problem(model)}")
        mean = out.action_mean[rows, position].float().cpu()
        std = out.action_log_std[rows, position].float().exp().cpu()
        noise = torch.randn(mean.shape, generator=generator)
        chosen = torch.tanh(mean + std * noise).numpy()
        return chosen, self.to_env_action(chosen)

    def _carry_memory(self, state: DTContext, complete: np.ndarray) -> DTContext:
        """Rows whose window is complete (its actions known) take that window's memory."""
        if not complete.any():
            return state
        out = self.model(*self._tensors(state), self._valid(state), memory=state.memory)
        if complete.all():
            return replace(state, memory=out.memory)
        old = state.memory or self.model.initial_memory(len(complete), self.device)
        take = torch.as_tensor(complete, device=self.device)
        memory = Memory(
            torch.where(take[None, :, None, None], out.memory.hidden, old.hidden),
            torch.where(take[:, None], out.memory.valid, old.valid),
        )
        return replace(state, memory=memory)


def sampling_problem(model: DecisionTransformer) -> str | None:
    """Why ``model`` has no action distribution to sample from, or None if it has one.

    A DT with logits (Discrete, MultiDiscrete, MultiBinary actions) samples them and an online
    DT its squashed Gaussian; a plain DT with continuous actions regresses one action per step.
    """
    if _kind(model) != "box" or model.stochastic:
        return None
    return (
        "a Decision Transformer with continuous actions predicts one action per step, not a "
        "distribution to sample (an online DT, algo: odt, has one)"
    )


def _set(tree: Tree, index: Any, value: Any) -> None:
    """``tree[index] = value`` for an array or every leaf of a dict (``value`` a matching
    tree, or one value for all)."""
    if not isinstance(tree, dict):
        tree[index] = value
        return
    for key, array in tree.items():
        array[index] = value[key] if isinstance(value, dict) else value


def _kind(model: Any) -> str:
    """A model's action kind; modules that only say ``discrete`` (a benchmark's reference
    models) are Discrete or Box."""
    return getattr(model, "action_kind", None) or ("discrete" if model.discrete else "box")


def __getattr__(name: str) -> object:
    """Names that moved to :mod:`rlformer.algos.dt.loading`, with a DeprecationWarning."""
    return moved_name(__name__, name)
