"""Issue 7 ("Hardening"), the library's crash items: each test here failed before the fix.

1. Batch normalization (``mlp2_normalized_network``) trains on one-row minibatches.
2. ``prioritized_replay`` with episode/sequence updates, and KL-needing optimizers (``natural_gradient``,
   ``optimized_step`` with ``ls_max_kl``) on agents that give no KL divergence, are refused when the agent is built.
3. Sizes, bounds and step counts that cannot work are refused with a SpecError naming the limit.
4. A NaN or infinite float action is reported by ``act()`` (``NonFiniteActionError``), not returned.

And what fuzzing the specs (tests/spec/test_fuzz_specs.py) found: a constant initial weight beyond float32, a
stride beyond int64, ``distributions: true`` for DDPG, prioritized replay's alpha and NaN TD errors.
"""

import math
import re
import warnings

import numpy as np
import pytest
import torch

from torchforce.agents import create_agent
from torchforce.agents.errors import NonFiniteActionError, NonFiniteError
from torchforce.core.networks import build_network
from torchforce.core.networks.base import Value
from torchforce.core.networks.tf_layer import BatchNormalization
from torchforce.core.optimizers import build_optimizer
from torchforce.environments import make
from torchforce.spec import SpecError, normalize_actions, normalize_states
from torchforce.spec.checks import MAX_ELEMENTS, MAX_SPAN, MAX_STEPS

NETWORK = [{"type": "dense", "size": 8}]
FLOAT = make("minimal", action_type="float")
BOUNDED = make("minimal", action_type="bounded")
INT = make("minimal", action_type="int")


def agent(spec, env=INT):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small capacities warn; not what these tests are about
        return create_agent({"network": NETWORK, "seed": 0, **spec}, states=env.states, actions=env.actions)


def run(agent, env, episodes):
    env.seed(0)
    for _ in range(episodes):
        state = env.reset()
        while True:
            state, terminal, reward = env.execute(agent.act(state))
            agent.observe(terminal=terminal, reward=reward)
            if terminal:
                break


def spec_error(build, *args, **kwargs) -> SpecError:
    with pytest.raises(SpecError) as caught:
        build(*args, **kwargs)
    return caught.value


# ---------------------------------------------------------------------------------------------- 1. batch norm


def test_batch_normalization_of_one_row_uses_the_running_statistics():
    layer = BatchNormalization(incoming=Value((3,)), path="network[1]")
    with torch.no_grad():
        layer.running_mean.copy_(torch.tensor([1.0, 2.0, 3.0]))
        layer.running_var.copy_(torch.tensor([4.0, 1.0, 0.25]))
    x = torch.tensor([[3.0, 2.0, 2.0]])
    training = layer.train()(x)
    expected = (x - layer.running_mean) / torch.sqrt(layer.running_var + 1e-3)
    torch.testing.assert_close(training, expected)
    torch.testing.assert_close(training, layer.eval()(x))
    torch.testing.assert_close(layer.running_mean, torch.tensor([1.0, 2.0, 3.0]))  # left as they were
    torch.testing.assert_close(layer.running_var, torch.tensor([4.0, 1.0, 0.25]))


def test_batch_normalization_of_one_row_still_trains_its_scale_and_shift():
    layer = BatchNormalization(incoming=Value((2,)), path="network[1]").train()
    layer(torch.tensor([[1.0, -1.0]])).sum().backward()
    assert layer.weight.grad is not None and layer.weight.grad.abs().sum() > 0
    torch.testing.assert_close(layer.bias.grad, torch.ones(2))


def test_batch_normalization_of_several_rows_uses_the_batch():
    layer = BatchNormalization(incoming=Value((2,)), path="network[1]").train()
    y = layer(torch.tensor([[1.0, 0.0], [3.0, 4.0]]))
    torch.testing.assert_close(y.mean(dim=0), torch.zeros(2))
    assert layer.running_mean.abs().sum() > 0


def test_batch_normalization_of_channels_with_one_value_each_after_a_conv():
    network = build_network(
        [{"type": "tf_layer", "layer": "batch_normalization"}, {"type": "flatten"}],
        normalize_states({"shape": (1, 1, 3)})[0],
    )
    output, _ = network.train()({"state": torch.ones(1, 1, 1, 3)}, {})
    assert torch.isfinite(output).all()


def test_ppo_trains_the_normalized_network_on_one_row_minibatches():
    ppo = agent(
        {
            "type": "ppo",
            "network": "mlp2_normalized_network",
            "subsampling_fraction": 0.01,
            "optimization_steps": 3,
            "update_mode": {"unit": "episodes", "batch_size": 1},
        }
    )
    run(ppo, make("minimal", action_type="int", episode_length=5), episodes=3)
    assert ppo.updates == 3
    assert all(torch.isfinite(p).all() for p in ppo.policy.parameters())


def test_ppo_with_minibatches_of_one_on_the_normalized_network():
    ppo = agent(
        {
            "type": "ppo",
            "network": "mlp2_normalized_network",
            "epochs": 1,
            "minibatch_size": 1,
            "update_mode": {"unit": "episodes", "batch_size": 1},
        }
    )
    run(ppo, make("minimal", action_type="int", episode_length=3), episodes=2)
    assert ppo.updates == 2


def test_batch_normalization_epsilon_must_be_positive():
    error = spec_error(BatchNormalization, incoming=Value((2,)), path="network[1]", epsilon=0.0)
    assert error.path == "network[1].epsilon"


# ---------------------------------------------------------------------------------- 2. refused when built


@pytest.mark.parametrize("kind", ["vpg", "ppo", "trpo", "dqn_nstep"])
@pytest.mark.parametrize("unit", ["episodes", "sequences"])
def test_prioritized_replay_cannot_serve_episode_or_sequence_updates(kind, unit):
    if kind == "dqn_nstep" and unit == "sequences":
        pytest.skip("dqn_nstep refuses sequence updates on its own")
    spec = {
        "type": kind,
        "update_mode": {"unit": unit, "batch_size": 2},
        "memory": {"type": "prioritized_replay", "capacity": 1000},
    }
    error = spec_error(agent, spec)
    assert error.path == "agent.memory.type"
    assert "'prioritized_replay' retrieves timesteps only" in error.message
    assert "'latest'" in error.hint and "'replay'" in error.hint


def test_prioritized_replay_named_by_its_bare_name():
    spec = {"type": "vpg", "update_mode": {"unit": "episodes", "batch_size": 2}, "memory": "prioritized_replay"}
    assert spec_error(agent, spec).path == "agent.memory"


def test_prioritized_replay_on_timesteps_still_works():
    dqn = agent(
        {
            "type": "dqn",
            "update_mode": {"unit": "timesteps", "batch_size": 4, "frequency": 4},
            "memory": {"type": "prioritized_replay", "capacity": 100},
        }
    )
    run(dqn, INT, episodes=2)
    assert dqn.updates > 0


NATURAL_GRADIENT = {"type": "natural_gradient", "learning_rate": 0.01}
ACTOR_CRITIC_ACTIONS = {"ddpg": BOUNDED, "naf": BOUNDED}


@pytest.mark.parametrize(
    ("kind", "key", "extra"),
    [
        ("vpg", "optimizer", {}),
        ("ppo", "step_optimizer", {}),
        ("dqn", "optimizer", {}),
        ("dqn_nstep", "optimizer", {}),
        ("dqfd", "optimizer", {}),
        ("naf", "optimizer", {}),
        ("ddpg", "optimizer", {}),
        ("ddpg", "critic_optimizer", {}),
        ("vpg", "baseline_optimizer", {"baseline_mode": "states", "baseline": {"type": "mlp", "sizes": [8]}}),
        ("trpo", "baseline_optimizer", {"baseline_mode": "states", "baseline": {"type": "mlp", "sizes": [8]}}),
    ],
)
def test_natural_gradient_is_refused_where_no_kl_divergence_is_given(kind, key, extra):
    error = spec_error(agent, {"type": kind, key: NATURAL_GRADIENT, **extra}, ACTOR_CRITIC_ACTIONS.get(kind, INT))
    assert error.path == f"agent.{key}.type"
    assert re.search(r"optimizer 'natural_gradient' needs the KL divergence .* provides none", error.message)
    assert "trpo" in error.hint and '"adam"' in error.hint


def test_a_nested_natural_gradient_is_refused_at_its_path():
    spec = {"type": "ppo", "step_optimizer": {"type": "multi_step", "num_steps": 2, "optimizer": NATURAL_GRADIENT}}
    assert spec_error(agent, spec).path == "agent.step_optimizer.optimizer.type"


def test_a_line_search_bounded_by_kl_is_refused_without_kl():
    spec = {
        "type": "vpg",
        "optimizer": {
            "type": "optimized_step",
            "ls_max_kl": 0.01,
            "optimizer": {"type": "adam", "learning_rate": 1e-3},
        },
    }
    error = spec_error(agent, spec)
    assert error.path == "agent.optimizer.ls_max_kl"
    assert "optimized_step' with ls_max_kl" in error.message and "Leave out 'ls_max_kl'" in error.hint


def test_trpo_still_takes_natural_gradient_steps():
    trpo = agent({"type": "trpo", "update_mode": {"unit": "episodes", "batch_size": 1}})
    before = [p.detach().clone() for p in trpo.policy.parameters()]
    run(trpo, INT, episodes=2)
    assert trpo.updates == 2
    assert any(not torch.equal(b, p) for b, p in zip(before, trpo.policy.parameters(), strict=True))


def test_build_optimizer_alone_still_builds_natural_gradient():
    parameters = [torch.nn.Parameter(torch.zeros(2))]
    assert build_optimizer(NATURAL_GRADIENT, parameters).needs_kl
    error = spec_error(build_optimizer, NATURAL_GRADIENT, parameters, path="optimizer", without_kl="the caller")
    assert error.path == "optimizer.type" and "the caller provides none" in error.message


# ------------------------------------------------------------------------------------------------ 3. limits

HUGE = 2**40
SPAN_HINT = "Leave out both min_value and max_value"


@pytest.mark.parametrize(
    ("states", "path", "fragment"),
    [
        ({"shape": HUGE}, "states.shape", f"more than one tensor may hold; expected at most {MAX_ELEMENTS} (2^31)"),
        ({"shape": [2**20, 2**20]}, "states.shape", "one sample of shape [1048576, 1048576] would have"),
        ({"shape": 1, "type": "int", "num_values": HUGE}, "states.num_values", "a table of one entry per value"),
        ({"shape": 1, "min_value": -math.inf, "max_value": 1.0}, "states.min_value", "not a finite number"),
        ({"shape": 1, "min_value": 0.0, "max_value": math.nan}, "states.max_value", "not a number"),
        ({"shape": 1, "min_value": -1e300, "max_value": 1.0}, "states.min_value", "out of float32's range"),
        ({"shape": 1, "min_value": -1e38, "max_value": 1e38}, "states", "too far apart"),
    ],
)
def test_state_limits(states, path, fragment):
    error = spec_error(normalize_states, states)
    assert error.path == path and fragment in str(error)


@pytest.mark.parametrize(
    ("actions", "path", "fragment"),
    [
        ({"type": "float", "shape": [HUGE]}, "actions.shape", "more than one tensor may hold"),
        ({"type": "int", "num_actions": HUGE}, "actions.num_actions", "logits"),
        ({"type": "int", "shape": [2**16], "num_actions": 2**16}, "actions.num_actions", "logits"),
        ({"type": "float", "min_value": -math.inf, "max_value": math.inf}, "actions.min_value", "not a finite number"),
        ({"type": "float", "min_value": 0.0, "max_value": math.inf}, "actions.max_value", "not a finite number"),
        ({"type": "float", "min_value": -1e308, "max_value": 1e308}, "actions.min_value", "out of float32's range"),
        ({"type": "float", "min_value": -6e37, "max_value": 6e37}, "actions", f"<= {MAX_SPAN:g}"),
    ],
)
def test_action_limits(actions, path, fragment):
    error = spec_error(normalize_actions, actions)
    assert error.path == path and fragment in str(error)


def test_bound_errors_say_how_to_leave_bounds_out():
    assert SPAN_HINT in spec_error(normalize_actions, {"type": "float", "min_value": -math.inf, "max_value": 1}).hint
    assert SPAN_HINT in spec_error(normalize_actions, {"type": "float", "min_value": -1e38, "max_value": 1e38}).hint


def test_widest_accepted_bounds_give_finite_actions():
    env = make("minimal", action_type="float")
    actions = {"type": "float", "shape": (), "min_value": -5e37, "max_value": 5e37}
    for kind in ("ppo", "ddpg"):
        learner = create_agent({"type": kind, "network": NETWORK, "seed": 0}, states=env.states, actions=actions)
        for _ in range(20):
            value = learner.act(np.zeros(1, dtype=np.float32))
            learner.observe(terminal=False, reward=0.0)
            assert np.isfinite(value) and -5e37 <= value <= 5e37


@pytest.mark.parametrize(
    ("layer", "path", "fragment"),
    [
        ({"type": "dense", "size": HUGE}, "network[0].size", "the weights [1099511627776, 1] would have"),
        ({"type": "linear", "size": HUGE}, "network[0].size", "more than one tensor may hold"),
        ({"type": "dueling", "size": HUGE}, "network[0].size", "more than one tensor may hold"),
        ({"type": "internal_lstm", "size": HUGE}, "network[0].size", "the LSTM weights"),
        ({"type": "tf_layer", "layer": "dense", "units": HUGE}, "network[0].units", "more than one tensor may hold"),
    ],
)
def test_layer_size_limits(layer, path, fragment):
    error = spec_error(build_network, [layer], normalize_states({"shape": 1})[0])
    assert error.path == path and fragment in str(error)


def test_layer_limits_on_images_and_embeddings():
    image = normalize_states({"shape": (8, 8, 3)})[0]
    error = spec_error(build_network, [{"type": "conv2d", "size": HUGE}], image)
    assert error.path == "network[0]" and "the filters" in error.message
    error = spec_error(build_network, [{"type": "conv2d", "size": 2**27, "window": 1}], image)  # 2^33 outputs
    assert error.path == "network[0]" and "the output per sample" in error.message
    error = spec_error(build_network, [{"type": "lstm", "size": HUGE}], normalize_states({"shape": (4, 2)})[0])
    assert error.path == "network[0].size"
    ints = normalize_states({"shape": (), "type": "int", "num_values": 2**20})[0]
    error = spec_error(build_network, [{"type": "embedding", "size": 2**12}], ints)
    assert error.path == "network[0]" and "embedding table" in error.message


def test_the_policy_head_of_a_wide_network_and_many_actions():
    actions = {"type": "int", "shape": (), "num_actions": 2**26}
    error = spec_error(
        create_agent, {"type": "ppo", "network": [{"type": "dense", "size": 64}]}, states=INT.states, actions=actions
    )
    assert error.path == "agent.actions.action" and "the policy head's weights" in error.message


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        (
            {
                "type": "ppo",
                "step_optimizer": {"type": "multi_step", "num_steps": 3 * 10**12, "optimizer": {"type": "adam"}},
            },
            "agent.step_optimizer.num_steps",
        ),
        (
            {
                "type": "vpg",
                "optimizer": {"type": "optimized_step", "ls_max_iterations": 3 * 10**12, "optimizer": {"type": "adam"}},
            },
            "agent.optimizer.ls_max_iterations",
        ),
        (
            {"type": "vpg", "optimizer": {"type": "evolutionary", "learning_rate": 0.1, "num_samples": 3 * 10**12}},
            "agent.optimizer.num_samples",
        ),
        ({"type": "trpo", "cg_max_iterations": 3 * 10**12}, "agent.cg_max_iterations"),
        ({"type": "trpo", "ls_max_iterations": 3 * 10**12}, "agent.ls_max_iterations"),
        ({"type": "ppo", "optimization_steps": 3 * 10**12}, "agent.optimization_steps"),
        ({"type": "ppo", "epochs": 3 * 10**12}, "agent.epochs"),
    ],
)
def test_step_limits(spec, path):
    error = spec_error(agent, spec)
    assert error.path == path
    assert "expected an integer in [" in str(error) and f"{MAX_STEPS}]" in str(error)
    assert "at most 10000 steps" in error.hint


def test_natural_gradient_iterations_are_limited():
    parameters = [torch.nn.Parameter(torch.zeros(2))]
    spec = {**NATURAL_GRADIENT, "cg_max_iterations": MAX_STEPS + 1}
    assert spec_error(build_optimizer, spec, parameters).path == "optimizer.cg_max_iterations"
    assert build_optimizer({**NATURAL_GRADIENT, "cg_max_iterations": MAX_STEPS - 1}, parameters)


def test_nested_steps_multiply():
    parameters = [torch.nn.Parameter(torch.zeros(2))]
    inner = {"type": "multi_step", "num_steps": 1000, "optimizer": {"type": "adam"}}
    assert build_optimizer(inner, parameters).inner_steps == 1000
    error = spec_error(build_optimizer, {"type": "multi_step", "num_steps": 100, "optimizer": inner}, parameters)
    assert error.path == "optimizer" and "takes up to 100000 inner steps" in error.message
    nested = {
        "type": "clipped_step",
        "clipping_value": 0.1,
        "optimizer": {"type": "multi_step", "num_steps": 20, "optimizer": inner},
    }
    assert spec_error(build_optimizer, nested, parameters).path == "optimizer.optimizer"
    error = spec_error(agent, {"type": "ppo", "optimization_steps": 50, "step_optimizer": inner})
    assert error.path == "agent.optimization_steps" and "an update takes 50000 inner steps" in error.message


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"type": "ppo", "memory": {"type": "latest", "capacity": HUGE}}, "agent.memory.capacity"),
        ({"type": "dqn", "update_mode": {"unit": "timesteps", "batch_size": HUGE}}, "agent.memory.capacity"),
        (
            {"type": "ppo", "step_optimizer": {"type": "adam", "learning_rate": math.inf}},
            "agent.step_optimizer.learning_rate",
        ),
        ({"type": "ppo", "discount": math.inf}, "agent.discount"),
        ({"type": "ppo", "seed": 2**70}, "agent.seed"),
        ({"type": "ppo", "states_preprocessing": {"type": "sequence", "length": HUGE}}, "agent.states_preprocessing"),
        (
            {"type": "ppo", "actions_exploration": {"type": "gaussian_noise", "sigma": math.inf}},
            "agent.actions_exploration.sigma",
        ),
    ],
)
def test_other_limits(spec, path):
    env = FLOAT if "actions_exploration" in spec else INT
    assert spec_error(agent, spec, env).path == path


def test_memory_of_images_beyond_the_limit():
    states = {"type": "float", "shape": (210, 160, 3)}
    spec = {"type": "dqn", "network": [{"type": "flatten"}, *NETWORK], "memory": {"type": "replay", "capacity": 30_000}}
    error = spec_error(create_agent, spec, states=states, actions=INT.actions)
    assert error.path == "agent.memory.capacity" and "Lower memory.capacity" in error.hint


def test_gym_boxes_spanning_float32_are_unbounded():
    from gymnasium import spaces

    from torchforce.environments.spaces import actions_from_space, states_from_space

    largest = np.finfo(np.float32).max
    box = spaces.Box(-largest, largest, shape=(2,), dtype=np.float32)
    assert "min_value" not in states_from_space(box)[0]
    spec, _, _ = actions_from_space(box)
    assert "min_value" not in spec
    normalize_actions(spec)
    spec, _, _ = actions_from_space(spaces.Box(np.float32([-1.0, -largest]), np.float32([1.0, largest])))
    assert spec["action0"]["min_value"] == -1.0 and "min_value" not in spec["action1"]


# ------------------------------------------------------------------------------------------ 4. NaN actions


def diverge(module: torch.nn.Module) -> None:
    """What a diverged update leaves behind: NaN parameters."""
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.fill_(math.nan)


@pytest.mark.parametrize(("kind", "env"), [("ppo", FLOAT), ("ppo", BOUNDED), ("ddpg", BOUNDED), ("naf", FLOAT)])
def test_a_nan_action_is_reported(kind, env):
    learner = agent({"type": kind}, env)
    diverge(learner.policy)
    with pytest.raises(NonFiniteActionError) as caught:
        learner.act(np.zeros(1, dtype=np.float32))
    error = caught.value
    assert isinstance(error, RuntimeError)
    assert error.agent == kind and error.action == "action"
    text = str(error)
    assert text.startswith(f"{kind} agent: action 'action' is NaN or infinite at timestep 0")
    assert "lower learning rate" in text and "clip_grad_norm" in text


def test_a_nan_action_is_reported_when_acting_independently_and_deterministically():
    learner = agent({"type": "ppo"}, FLOAT)
    diverge(learner.policy)
    with pytest.raises(NonFiniteActionError):
        learner.act(np.zeros(1, dtype=np.float32), deterministic=True, independent=True)


def test_an_infinite_state_is_named_as_a_cause():
    learner = agent({"type": "ppo"}, FLOAT)
    with pytest.raises(NonFiniteActionError, match="check that the states are finite"):
        learner.act(np.array([math.inf], dtype=np.float32))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_exploration_noise_beyond_float32_is_reported_as_such():
    learner = agent({"type": "ddpg", "actions_exploration": {"type": "gaussian_noise", "sigma": 1e300}}, FLOAT)
    with pytest.raises(NonFiniteActionError, match="exploration noise made it NaN or infinite. Lower the exploration"):
        for _ in range(5):
            learner.act(np.zeros(1, dtype=np.float32))
            learner.observe(terminal=False, reward=0.0)


def test_a_diverged_int_policy_still_acts():
    learner = agent({"type": "ppo"}, INT)
    diverge(learner.policy)
    assert learner.act(np.zeros(1, dtype=np.float32)) in (0, 1)


# --------------------------------------------------------------------------------------- found by fuzzing


@pytest.mark.parametrize(
    ("layer", "path"),
    [
        ({"type": "dense", "size": 2, "weights": 1e308}, "network[0].weights"),
        ({"type": "dense", "size": 2, "weights": 10**400}, "network[0].weights"),
        ({"type": "dense", "size": 2, "weights": math.nan}, "network[0].weights"),
        ({"type": "dense", "size": 2, "bias": 1e39}, "network[0].bias"),
        ({"type": "linear", "size": 2, "weights": [[1e308, 0.0]]}, "network[0].weights"),
        ({"type": "linear", "size": 1, "bias": [math.inf]}, "network[0].bias"),
        (
            {"type": "internal_lstm", "size": 2, "lstmcell_args": {"forget_bias": 1e300}},
            "network[0].lstmcell_args.forget_bias",
        ),
    ],
)
def test_initial_values_beyond_float32(layer, path):
    assert spec_error(build_network, [layer], normalize_states({"shape": 1})[0]).path == path


@pytest.mark.parametrize(
    ("layer", "path"),
    [
        ({"type": "conv2d", "size": 2, "stride": 2**64}, "network[0].stride"),
        ({"type": "conv2d", "size": 2, "window": [3, 2**40]}, "network[0].window[1]"),
        ({"type": "pool2d", "window": 2**20, "stride": 1}, "network[0].window"),
        ({"type": "pool2d", "window": 2**31, "stride": 2**31}, "network[0].window"),
    ],
)
def test_windows_and_strides_beyond_what_torch_takes(layer, path):
    error = spec_error(build_network, [layer], normalize_states({"shape": (4, 4, 2)})[0])
    assert error.path == path


def test_a_large_stride_still_works():
    network = build_network([{"type": "conv2d", "size": 2, "stride": 2**30}], normalize_states({"shape": (4, 4, 1)})[0])
    output, _ = network({"state": torch.ones(1, 4, 4, 1)}, {})
    assert output.shape == (1, 2)


@pytest.mark.parametrize(
    ("spec", "env", "path"),
    [
        ({"type": "ddpg", "distributions": True}, BOUNDED, "agent.distributions"),
        (
            {"type": "ppo", "distributions": {"action": {"type": "gaussian", "mean": 1e300}}},
            FLOAT,
            "agent.distributions.action.mean",
        ),
        (
            {"type": "ppo", "distributions": {"action": {"type": "beta", "alpha": -1e300}}},
            BOUNDED,
            "agent.distributions.action.alpha",
        ),
        (
            {"type": "ddpg", "distributions": {"action": {"type": "deterministic", "mean": 1e300}}},
            FLOAT,
            "agent.distributions.action.mean",
        ),
        (
            {"type": "dqn", "actions_exploration": {"type": "epsilon_decay", "timesteps": 10**400}},
            INT,
            "agent.actions_exploration.timesteps",
        ),
        (
            {"type": "dqn", "memory": {"type": "prioritized_replay", "capacity": 100, "prioritization_weight": 1e308}},
            INT,
            "agent.memory.prioritization_weight",
        ),
        (
            {
                "type": "dqn",
                "memory": {"type": "prioritized_replay", "capacity": 100, "prioritization_constant": 1e308},
            },
            INT,
            "agent.memory.prioritization_constant",
        ),
    ],
)
def test_agent_options_found_by_fuzzing(spec, env, path):
    assert spec_error(agent, spec, env).path == path


def test_nan_td_errors_are_reported_not_stored_as_priorities():
    dqn = agent(
        {
            "type": "dqn",
            "update_mode": {"unit": "timesteps", "batch_size": 4, "frequency": 4},
            "memory": {"type": "prioritized_replay", "capacity": 100},
        }
    )
    diverge(dqn.policy)
    with pytest.raises(NonFiniteError, match="dqn agent: the TD errors of update 1 are NaN or infinite"):
        run(dqn, INT, episodes=2)
    assert np.isfinite(dqn.memory.priorities).all()
