"""Typed agent configs: one frozen dataclass per agent type with its options, their defaults and one line of
documentation each, validated when it is built.

The classes (one per agent type; the agents' own classes are another hierarchy)::

    AgentConfig                   what every agent has: seed, device, saver, summarizer, execution, 2018 no-op keys
      ConstantConfig, RandomConfig
      LearningConfig              agents that learn: preprocessing, exploration, update_mode, memory, discount...
        PolicyGradientConfig      a state-value baseline, GAE, advantage normalization
          VPGConfig, PPOConfig, TRPOConfig
        DQNConfig, DQNNstepConfig, DQFDConfig, DDPGConfig, NAFConfig

``XConfig.from_spec(options)`` builds a config from the flat keys of a 2018 agent spec; ``to_spec()`` gives them
back as JSON (with ``type``), as they are saved beside checkpoints. ``states``, ``actions`` and ``network`` are
not options: they are the agent constructor's arguments, as in 0.4's ``PPOAgent(states, actions, network, ...)``
(``parse`` splits a whole agent spec into the two). Scalar options are checked here with the ``torchforce.spec``
validators; structured ones (network, memory, optimizers, preprocessing, exploration, saver...) pass through as
given, and their builders check them when the agent is made.

2018 keys that change nothing in torchforce are accepted, so 2018 configs keep loading, and handled here once:
``batched_observe`` (observe is always cheap; 0.3.5's integer form is an error naming ``batching_capacity``),
``batching_capacity`` (checked, then unused), ``scope`` (a name only) and, for the constant and random agents, the
2018 client's ``distributed`` (the name of ``execution`` before 0.4). Their one-line docs say so.

``torchforce.agents.schema`` turns the same classes into JSON Schemas for editors (``tfcli config schema``); the
option fields and their checks are ``torchforce.spec.options``, and those only agent configs have
``torchforce.agents.options``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from torchforce.agents.options import (
    BatchedObserve,
    FlagOr,
    Scheduled,
    huber_loss_option,
    no_entropy_option,
    optimizer_option,
    random_timesteps_option,
    scope_option,
    target_sync_frequency_option,
    target_update_weight_option,
)
from torchforce.spec import SpecError, check_kwargs, expect_choice, expect_dict
from torchforce.spec.options import SEED, Choice, Flag, Integer, Number, option

CONSTRUCTOR_KEYS = ("states", "actions", "network")  # an agent constructor's arguments, not config options
SCHEMA_KEY = "$schema"  # where a config file may name its schema for editors; ignored when a config is built


# --------------------------------------------------------------------------------------------------------- configs


EXECUTION_TYPES = ("single", "multi-threaded", "distributed")


def check_execution(execution: dict | None) -> dict | None:
    """The 2018 ``execution`` spec. 2018 built TensorFlow parameter servers and workers from it inside the agent; in
    torchforce a runner distributes (``DistributedRunner``, or an experiment's run mode), so an agent spec asking
    for ``distributed`` is refused here, with where to go, rather than silently run alone."""
    if execution is None:
        return None
    execution = dict(expect_dict(execution, "execution"))
    kind = execution.get("type", "single")
    kind = {"multi_threaded": "multi-threaded", "threaded": "multi-threaded"}.get(kind, kind)
    expect_choice(kind, "execution.type", EXECUTION_TYPES)
    if kind == "distributed":
        raise SpecError(
            "execution.type",
            "a distributed agent is made by its runner in torchforce, not by its spec",
            got=execution.get("type"),
            hint="Drop 'execution' and run the agent with torchforce.execution.DistributedRunner(agent, environment, "
            "num_workers=..., num_parameter_servers=...), or in an experiment with run_mode 'distributed' (tfcli "
            "reads this execution spec and does that for you).",
        )
    return execution


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """The options every agent has."""

    kind: ClassVar[str] = "agent"  # the agent type this config is for (its AGENTS registry name)
    takes_network: ClassVar[bool] = False  # whether the agent's constructor takes a ``network``

    batched_observe: bool = option(
        True,
        "2018 key with no effect (observe is always cheap): true or false; 0.3.5's number is batching_capacity.",
        BatchedObserve(),
    )
    batching_capacity: int = option(
        1000, "2018 key with no effect beyond this check: the most rows observe buffered.", Integer(minimum=1)
    )
    scope: str | None = scope_option(None)
    device: str | None = option(
        None,
        'The torch device to compute on ("cpu", "cuda", "cuda:1", or "auto": a GPU where there is one, else the '
        "CPU); null: the CPU.",
    )
    saver: dict | None = option(None, "Checkpointing: directory, seconds or steps, load, basename; null: off.")
    summarizer: dict | None = option(None, "TensorBoard summaries: directory, steps, labels; null: off.")
    execution: dict | None = option(None, "2018 execution spec; single or multi-threaded (a runner distributes).")
    seed: int | None = option(
        None,
        "Seeds torch's and the agent's random numbers; null: unseeded.",
        SEED,
    )

    def __post_init__(self) -> None:
        for item in dataclasses.fields(self):
            check = item.metadata.get("check")
            if check is not None:
                object.__setattr__(self, item.name, check(getattr(self, item.name), item.name))

    # ------------------------------------------------------------------ from and to specs

    @classmethod
    def from_spec(cls, options: Mapping[str, Any]) -> Self:
        """The config of the flat 2018 keys in ``options``; ``type``, if given, must name this config's agent (or
        its 2018 alias), ``$schema`` is ignored. An unknown key is a SpecError naming it, with a did-you-mean."""
        options = dict(expect_dict(options, ""))
        options.pop(SCHEMA_KEY, None)
        kind = options.pop("type", None)
        if kind is not None and _canonical(kind) != cls.kind:
            raise SpecError("type", f"not the type of a {cls.__name__}", got=kind, expected=f'"{cls.kind}"')
        for key in options:
            if key in CONSTRUCTOR_KEYS:
                raise SpecError(
                    key,
                    "an argument of the agent's constructor, not an option of its config",
                    hint="Pass it to the agent, or split the spec with parse().",
                )
            legacy = _legacy_keys().get(key)
            if legacy is not None:
                raise SpecError(key, f"'{key}' is the 0.3.5 name; use '{legacy}'")
        check_kwargs(cls, options, "", what=f"agent '{cls.kind}'", got=...)
        return cls(**options)

    @classmethod
    def resolve(cls, config: AgentConfig | None, options: Mapping[str, Any]) -> Self:
        """What an agent constructor ``__init__(states, actions, network, *, config=None, **options)`` works from:
        ``config``, with ``options`` replacing some of its values (each checked like ``from_spec``'s)."""
        if config is None:
            return cls.from_spec(options)
        if type(config) is not cls:
            raise SpecError("config", f"a {cls.kind} agent takes a {cls.__name__}", got=config, expected=cls.__name__)
        return cls.from_spec({**config.options(), **options}) if options else config

    @property
    def execution_spec(self) -> dict | None:
        """The execution spec the agent checks (``execution``; the constant and random agents also take 2018's
        ``distributed`` in its place)."""
        return self.execution

    def options(self) -> dict[str, Any]:
        """The options as they are (not converted to JSON), by name."""
        return {item.name: getattr(self, item.name) for item in dataclasses.fields(self)}

    def to_spec(self) -> dict[str, Any]:
        """The flat spec as JSON: ``type`` and every option, defaults included (what checkpoints record, with the
        agent's states, actions and network)."""
        from torchforce.agents.state import jsonable  # imports torch: only when a spec is written

        return {"type": self.kind, **{name: jsonable(value) for name, value in self.options().items()}}

    @classmethod
    def docs(cls) -> dict[str, str]:
        """Each option's one line of documentation, by name."""
        return {item.name: item.metadata.get("doc", "") for item in dataclasses.fields(cls)}


@dataclass(frozen=True, kw_only=True)
class ConstantConfig(AgentConfig):
    """ConstantAgent: always the same action."""

    kind: ClassVar[str] = "constant"

    action_values: Any = option(doc="The action to take: a value, or {action_name: value} for several actions.")
    scope: str | None = scope_option("constant")
    distributed: dict | None = option(
        None, "2018 client's name of execution (before 0.4); used when execution is not given."
    )

    @property
    def execution_spec(self) -> dict | None:
        """``execution``, or the 2018 client's ``distributed`` in its place."""
        return self.execution or self.distributed


@dataclass(frozen=True, kw_only=True)
class RandomConfig(AgentConfig):
    """RandomAgent: uniform random actions, the baseline every other agent must beat."""

    kind: ClassVar[str] = "random"

    scope: str | None = scope_option("random")
    distributed: dict | None = option(None, ConstantConfig.docs()["distributed"])

    @property
    def execution_spec(self) -> dict | None:
        """``execution``, or the 2018 client's ``distributed`` in its place."""
        return self.execution or self.distributed


@dataclass(frozen=True, kw_only=True)
class LearningConfig(AgentConfig):
    """The options of every agent that learns."""

    takes_network: ClassVar[bool] = True

    variable_noise: float | None = option(
        None,
        "Std of Gaussian noise added to the policy's parameters while it acts; null: none.",
        Number(minimum=0.0, nullable=True),
    )
    states_preprocessing: list | dict | None = option(
        None, "Preprocessing of the states: a list of steps, one step, or {state_name: steps}; null: none."
    )
    actions_exploration: dict | str | None = option(
        None, "Exploration added to actions: one spec, or {action_name: spec}; null: none."
    )
    reward_preprocessing: list | dict | None = option(
        None, "Preprocessing of the reward: a list of steps or one step; null: none."
    )
    update_mode: dict | None = option(
        None,
        "When to update on what: unit, batch_size, frequency, first_update, updates (each time one is due); "
        "null: the agent's default.",
    )
    memory: dict | str | None = option(
        None, "Where experience is stored: a memory spec (type, capacity); null: the agent's default."
    )
    discount: float = option(0.99, "Discount factor gamma of future rewards.", Number(minimum=0.0, maximum=1.0))
    distributions: dict | None = option(
        None, "The policy's head per action: {action_name: distribution spec}; null: by action type."
    )
    entropy_regularization: float | None = option(
        None, "Weight of the entropy bonus in the policy loss; null: none.", Number(minimum=0.0, nullable=True)
    )
    mixed_precision: str | None = option(
        None,
        'The networks\' matrix products and convolutions in bfloat16 ("bfloat16", torch.autocast; parameters, '
        'optimizer state, heads and losses stay float32); "auto": bfloat16 where the device computes it natively (a '
        "GPU with bfloat16 arithmetic, an x86 CPU with AVX512-BF16 or AMX), float32 elsewhere; null: float32 "
        "throughout.",
        Choice(("bfloat16", "auto"), nullable=True),
    )
    compile: bool = option(
        False,
        "Compile the losses the agent's optimizers step on with torch.compile (TorchInductor), forward and backward: "
        "faster updates of small networks on small batches (not of CNNs: slower there), after a first update that "
        "pays for compiling (15-25 s on a CPU); needs a C++ compiler on a CPU.",
        Flag(),
    )


@dataclass(frozen=True, kw_only=True)
class PolicyGradientConfig(LearningConfig):
    """The options of the policy-gradient agents: a state-value baseline and how advantages are computed."""

    baseline_mode: str | None = option(
        None,
        'What the baseline sees: "states", or the policy\'s embedding ("network"); null: no baseline.',
        Choice(("states", "network"), nullable=True),
    )
    baseline: dict | None = option(None, "The state-value baseline: a baseline spec (mlp, cnn, custom, aggregated).")
    baseline_optimizer: dict | str | None = option(
        None, "The baseline's optimizer spec; null: adam with learning rate 1e-3 (2018 had none: policy loss only)."
    )
    gae_lambda: float | None = option(
        None,
        "Lambda of generalized advantage estimation (needs a baseline); null: no GAE.",
        Number(minimum=0.0, maximum=1.0, nullable=True),
    )
    normalize_advantages: bool | str = option(
        False, "Normalize each batch's advantages to mean 0 and std 1.", FlagOr(())
    )


@dataclass(frozen=True, kw_only=True)
class VPGConfig(PolicyGradientConfig):
    """Vanilla policy gradient (REINFORCE) with an optional baseline and GAE."""

    kind: ClassVar[str] = "vpg"

    scope: str | None = scope_option("vpg")
    optimizer: dict | str | None = optimizer_option()


@dataclass(frozen=True, kw_only=True)
class PPOConfig(PolicyGradientConfig):
    """Proximal Policy Optimization: the clipped surrogate objective."""

    kind: ClassVar[str] = "ppo"

    scope: str | None = scope_option("ppo")
    normalize_advantages: bool | str = option(
        False,
        'Normalize the advantages to mean 0 and std 1: true over each batch, "minibatch" over each minibatch of '
        "an epoch (ours; SB3's and CleanRL's).",
        FlagOr(("minibatch",)),
    )
    likelihood_ratio_clipping: float | dict | None = option(
        0.2,
        "Epsilon of the clipped ratio, [1 - eps, 1 + eps], or a schedule of it (ours: "
        '{"type": "linear", "initial": 0.1, "final": 0, "timesteps": N}); null: no clipping.',
        Scheduled(Number(minimum=0.0, nullable=True)),
    )
    step_optimizer: dict | str | None = optimizer_option(
        "The optimizer of each step; null: adam with learning rate 1e-3."
    )
    subsampling_fraction: float = option(
        0.1,
        "Fraction of the batch each of the optimization_steps uses, sampled with replacement.",
        Number(minimum=0.0, maximum=1.0, open_minimum=True),
    )
    optimization_steps: int = option(50, "Optimizer steps per update (without epochs).", Integer(minimum=1, steps=True))
    epochs: int | None = option(
        None,
        "Passes over the batch in shuffled minibatches (instead of optimization_steps); null: off.",
        Integer(minimum=1, nullable=True, steps=True),
    )
    minibatch_size: int | None = option(
        None, "Rows per minibatch of the epochs; null: the whole batch.", Integer(minimum=1, nullable=True)
    )
    value_loss_weight: float | None = option(
        None,
        "Weight c of the baseline's loss 0.5 * (V(s) - R)^2 added to the policy's (PPO's eq. 9; SB3's vf_coef is "
        "c / 2), both stepped by step_optimizer under one gradient clip; with baseline_mode network the policy's "
        "network learns from the value loss too (a shared torso); null: the baseline has its own optimizer.",
        Number(minimum=0.0, open_minimum=True, nullable=True),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.minibatch_size is not None and self.epochs is None:
            raise SpecError("minibatch_size", "goes with 'epochs'", hint="Set epochs too, or use subsampling_fraction.")
        if self.value_loss_weight is not None and self.baseline_mode is None:
            raise SpecError(
                "value_loss_weight",
                "weighs the baseline's loss, and there is no baseline",
                got=self.value_loss_weight,
                hint='Set baseline_mode ("states" or "network") and a baseline, or leave value_loss_weight out.',
            )
        if self.value_loss_weight is not None and self.baseline_optimizer is not None:
            raise SpecError(
                "baseline_optimizer",
                "unused: with value_loss_weight the baseline steps with step_optimizer",
                got=self.baseline_optimizer,
                expected="null",
                hint="Leave baseline_optimizer out, or value_loss_weight.",
            )


@dataclass(frozen=True, kw_only=True)
class TRPOConfig(PolicyGradientConfig):
    """Trust Region Policy Optimization: a natural-gradient step within a KL bound, then a line search."""

    kind: ClassVar[str] = "trpo"

    scope: str | None = scope_option("trpo")
    likelihood_ratio_clipping: float | None = option(
        None, "Epsilon of a PPO-style clipped ratio; null: no clipping.", Number(minimum=0.0, nullable=True)
    )
    learning_rate: float = option(1e-3, "The KL bound delta of each update.", Number(minimum=1e-12))
    cg_max_iterations: int = option(
        20, "Conjugate-gradient iterations of the natural-gradient step.", Integer(minimum=1, steps=True)
    )
    cg_damping: float = option(1e-3, "Damping added to the Fisher matrix in conjugate gradient.", Number(minimum=0.0))
    cg_unroll_loop: bool = option(False, "2018 graph option, accepted: true or false.", Flag())
    ls_max_iterations: int = option(
        10, "Backtracking line-search iterations (halving the step).", Integer(minimum=0, steps=True)
    )
    ls_accept_ratio: float = option(
        0.9, "Least improvement, as a fraction of the predicted one, the line search accepts.", Number(minimum=0.0)
    )
    ls_unroll_loop: bool = option(False, "2018 graph option, accepted: true or false.", Flag())


@dataclass(frozen=True, kw_only=True)
class DQNConfig(LearningConfig):
    """Deep Q-network: one-step TD targets from a target network, on transitions sampled from a replay memory."""

    kind: ClassVar[str] = "dqn"

    scope: str | None = scope_option("dqn")
    optimizer: dict | str | None = optimizer_option(
        "The Q-network's optimizer spec; null: adam with learning rate 1e-3."
    )
    target_sync_frequency: int = target_sync_frequency_option()
    target_update_weight: float = target_update_weight_option()
    double_q_model: bool = option(
        False, "Double Q-learning: the online network picks the next action, the target network values it.", Flag()
    )
    huber_loss: float | None = huber_loss_option()


@dataclass(frozen=True, kw_only=True)
class DQNNstepConfig(LearningConfig):
    """DQN n-step: Q-learning on the discounted returns of whole episodes."""

    kind: ClassVar[str] = "dqn_nstep"

    scope: str | None = scope_option("dqn-nstep")
    optimizer: dict | str | None = optimizer_option(DQNConfig.docs()["optimizer"])
    target_sync_frequency: int = target_sync_frequency_option()
    target_update_weight: float = target_update_weight_option()
    double_q_model: bool = option(False, DQNConfig.docs()["double_q_model"], Flag())
    huber_loss: float | None = huber_loss_option()
    horizon: int | None = option(
        None, "Steps n of the n-step return; null: to the episode's end.", Integer(minimum=1, nullable=True)
    )


@dataclass(frozen=True, kw_only=True)
class DQFDConfig(LearningConfig):
    """Deep Q-learning from Demonstrations: double DQN plus a large-margin loss on expert demonstrations."""

    kind: ClassVar[str] = "dqfd"

    scope: str | None = scope_option("dqfd")
    optimizer: dict | str | None = optimizer_option(DQNConfig.docs()["optimizer"])
    target_sync_frequency: int = target_sync_frequency_option()
    target_update_weight: float = target_update_weight_option()
    huber_loss: float | None = huber_loss_option()
    expert_margin: float = option(
        0.5, "Margin l by which the expert's action must beat every other in Q.", Number(minimum=0.0)
    )
    supervised_weight: float = option(0.1, "Weight of the large-margin loss on demonstrations.", Number(minimum=0.0))
    demo_memory_capacity: int = option(
        10000, "Capacity of the demonstration memory (at least one demonstration batch).", Integer(minimum=1)
    )
    demo_sampling_ratio: float = option(
        0.2,
        "Fraction of the transitions each update learns from that are demonstrations (in a step of their own).",
        Number(minimum=0.0, maximum=1.0, open_minimum=True, open_maximum=True),
    )


@dataclass(frozen=True, kw_only=True)
class DDPGConfig(LearningConfig):
    """Deep Deterministic Policy Gradient: an actor mu(s) ascending a critic Q(s, a), each with a target copy."""

    kind: ClassVar[str] = "ddpg"

    scope: str | None = scope_option("ddpg")
    optimizer: dict | str | None = optimizer_option("The actor's optimizer spec; null: adam with learning rate 1e-3.")
    entropy_regularization: float | None = no_entropy_option()
    critic_network: list | dict | str | None = option(
        None, "The critic Q(s, a): a layer list over the states and actions; null: the actor's network."
    )
    critic_optimizer: dict | str | None = optimizer_option(
        "The critic's optimizer spec; null: adam with learning rate 1e-3."
    )
    target_sync_frequency: int = target_sync_frequency_option()
    target_update_weight: float = target_update_weight_option()
    random_timesteps: int = random_timesteps_option()


@dataclass(frozen=True, kw_only=True)
class NAFConfig(LearningConfig):
    """Normalized Advantage Functions: a Q-function quadratic in float actions, maximal at mu(s)."""

    kind: ClassVar[str] = "naf"

    scope: str | None = scope_option("naf")
    optimizer: dict | str | None = optimizer_option(DQNConfig.docs()["optimizer"])
    entropy_regularization: float | None = no_entropy_option()
    target_sync_frequency: int = target_sync_frequency_option()
    target_update_weight: float = target_update_weight_option()
    random_timesteps: int = random_timesteps_option()
    double_q_model: bool = option(False, "2018 key with no effect (V' needs no argmax): true or false.", Flag())
    huber_loss: float | None = huber_loss_option()


CONFIGS: dict[str, type[AgentConfig]] = {
    config.kind: config
    for config in (
        ConstantConfig,
        RandomConfig,
        VPGConfig,
        PPOConfig,
        TRPOConfig,
        DQNConfig,
        DQNNstepConfig,
        DQFDConfig,
        DDPGConfig,
        NAFConfig,
    )
}


def _canonical(kind: Any) -> str | None:
    """The registry name of an agent type or its 2018 alias (``ppo_agent`` -> ``ppo``); None if unknown."""
    from torchforce.agents import AGENTS  # the registry imports every agent: only when asked

    return AGENTS.canonical(kind)


def _legacy_keys() -> dict[str, str]:
    from torchforce.agents import LEGACY_KEYS

    return LEGACY_KEYS


def config_class(kind: Any, path: str = "type") -> type[AgentConfig]:
    """The config class of an agent type (a registry name or 2018 alias); unknown: a SpecError with did-you-mean."""
    from torchforce.agents import AGENTS

    canonical = AGENTS.canonical(kind)
    if canonical is None or canonical not in CONFIGS:
        AGENTS.get(kind, path)  # the registry's error for an unknown name
        raise SpecError(path, "a user agent class has no config here", got=kind)
    return CONFIGS[canonical]


def parse(spec: Mapping[str, Any]) -> tuple[AgentConfig, dict[str, Any]]:
    """A flat agent spec (``type`` and options, possibly states, actions, network) as its config and the
    constructor's arguments (those of ``states``/``actions``/``network`` it holds)."""
    spec = dict(expect_dict(spec, ""))
    if "type" not in spec:
        raise SpecError("", "an agent spec needs 'type'", got=spec)
    cls = config_class(spec["type"])
    keys = CONSTRUCTOR_KEYS if cls.takes_network else CONSTRUCTOR_KEYS[:2]
    arguments = {key: spec.pop(key) for key in keys if key in spec}
    return cls.from_spec(spec), arguments


__all__ = [
    "CONFIGS",
    "AgentConfig",
    "ConstantConfig",
    "DDPGConfig",
    "DQFDConfig",
    "DQNConfig",
    "DQNNstepConfig",
    "LearningConfig",
    "NAFConfig",
    "PPOConfig",
    "PolicyGradientConfig",
    "RandomConfig",
    "TRPOConfig",
    "VPGConfig",
    "config_class",
    "parse",
]
