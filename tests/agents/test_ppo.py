"""PPOAgent options against hand computations: the clipped surrogate, entropy bonus, advantages (returns, baseline,
GAE, normalization, sequence windows), both optimization styles, baseline kinds and modes, update units, the info
of an update, and the spec errors."""

import math

import numpy as np
import pytest
import torch

from torchforce.agents import create_agent
from torchforce.agents.transitions import Transitions
from torchforce.core.baselines import shared_state_values, state_values
from torchforce.core.returns import gae
from torchforce.environments import make
from torchforce.spec import SpecError

ENV = make("minimal", action_type="int")
NETWORK = [{"type": "dense", "size": 8}]
BASELINE = {"baseline_mode": "states", "baseline": {"type": "mlp", "sizes": [8]}}


def ppo(env=ENV, **options):
    spec = {"type": "ppo", "network": NETWORK, "update_mode": {"unit": "episodes", "batch_size": 2}, "seed": 0}
    return create_agent({**spec, **options}, states=env.states, actions=env.actions)


def run(agent, env, episodes, seed=0):
    env.seed(seed)
    for _ in range(episodes):
        state = env.reset()
        while True:
            state, terminal, reward = env.execute(agent.act(state))
            agent.observe(terminal=terminal, reward=reward)
            if terminal:
                break


def transitions(rewards, terminals, states=None):
    """A hand-made batch on the minimal environment (one float state, one int action)."""
    size = len(rewards)
    states = torch.linspace(-1.0, 1.0, size) if states is None else torch.tensor(states, dtype=torch.float32)
    return Transitions(
        states={"state": states.view(size, 1)},
        internals={},
        actions={"action": torch.arange(size) % 2},
        reward=torch.tensor(rewards, dtype=torch.float32),
        terminal=torch.tensor(terminals, dtype=torch.int8),
        next_states={"state": states.flip(0).view(size, 1)},
    )


def recording(agent):
    """Record every update's batch and info, each update reported as if summaries were due (without them, an update
    leaves out the report's pass over the batch: see test_an_update_nobody_reads_skips_its_report)."""
    update, log = agent._update, []

    def record(batch):
        agent.reporting = True
        info = update(batch)
        log.append((batch, info))
        return info

    agent._update = record
    return log


# ---------------------------------------------------------------- the clipped surrogate

RATIOS = [1.5, 0.5, 1.5, 0.5, 1.1]
ADVANTAGES = [1.0, 1.0, -1.0, -1.0, 2.0]


def surrogate_batch(agent, ratios=RATIOS, advantages=ADVANTAGES):
    """A minibatch whose probability ratios pi/pi_old are exactly ``ratios``."""
    data = transitions([0.0] * len(ratios), [0] * (len(ratios) - 1) + [1]).flat()
    with torch.no_grad():
        params, _, _ = agent.policy({"state": data["states/state"]}, {})
        log_prob = agent.policy.log_prob(params, {"action": data["actions/action"]})
    data["old_log_prob"] = log_prob - torch.log(torch.tensor(ratios))
    data["advantages"] = torch.tensor(advantages)
    return data, params


@pytest.mark.parametrize(
    "clipping, expected",
    [
        # min(r A, clip(r, 0.8, 1.2) A) = [1.2, 0.5, -1.5, -0.8, 2.2] (the 2018 bound 1/1.2 would give -0.833 in row 3)
        (0.2, -(1.2 + 0.5 - 1.5 - 0.8 + 2.2) / 5),
        (None, -(1.5 + 0.5 - 1.5 - 0.5 + 2.2) / 5),  # no clipping: -mean(r A)
    ],
)
def test_clipped_surrogate_by_hand(clipping, expected):
    agent = ppo(likelihood_ratio_clipping=clipping)
    data, _ = surrogate_batch(agent)
    assert agent._policy_loss(data).item() == pytest.approx(expected, rel=1e-5)


def test_entropy_regularization_subtracts_the_mean_entropy():
    plain, regularized = ppo(), ppo(entropy_regularization=0.1)
    data, params = surrogate_batch(plain)
    entropy = plain.policy.entropy(params).mean().item()
    assert entropy > 0.5  # near log 2 for a fresh policy over two actions
    difference = regularized._policy_loss(data).item() - plain._policy_loss(data).item()
    assert difference == pytest.approx(-0.1 * entropy, rel=1e-5)


# ---------------------------------------------------------------- advantages


def constant_baseline(agent, value):
    with torch.no_grad():
        agent.baseline.value.weight.zero_()
        agent.baseline.value.bias.fill_(value)


GAMMA, LAMBDA = 0.9, 0.8


def advantages_of(agent, batch):
    data = agent._with_advantages(batch)
    return data["advantages"].numpy(), data["returns"].numpy()


@pytest.mark.parametrize(
    "options, terminals, advantages, returns",
    [
        # no baseline: discounted returns 1 + .9 + .81, 1 + .9, 1
        ({}, [0, 0, 1], [2.71, 1.9, 1.0], [2.71, 1.9, 1.0]),
        # baseline V = 0.5, no GAE: returns bootstrap at a cut (terminal 2), advantages = returns - V
        (BASELINE, [0, 0, 1], [2.21, 1.4, 0.5], [2.71, 1.9, 1.0]),
        (BASELINE, [0, 0, 2], [2.5745, 1.805, 0.95], [3.0745, 2.305, 1.45]),
        # GAE: delta = r + .9 * V' * [terminal != 1] - V = [.95, .95, .5]; A_t = delta_t + .72 A_{t+1}
        ({**BASELINE, "gae_lambda": LAMBDA}, [0, 0, 1], [0.95 + 0.72 * 1.31, 1.31, 0.5], [2.3932, 1.81, 1.0]),
        ({**BASELINE, "gae_lambda": LAMBDA}, [0, 0, 2], [0.95 + 0.72 * 1.634, 1.634, 0.95], [2.62648, 2.134, 1.45]),
    ],
)
def test_advantages_by_hand(options, terminals, advantages, returns):
    agent = ppo(discount=GAMMA, **options)
    if agent.baseline is not None:
        constant_baseline(agent, 0.5)
    got_advantages, got_returns = advantages_of(agent, transitions([1.0, 1.0, 1.0], terminals))
    assert got_advantages.tolist() == pytest.approx(advantages, abs=1e-5)
    assert got_returns.tolist() == pytest.approx(returns, abs=1e-5)


def test_gae_advantages_equal_the_returns_function_with_a_learned_baseline():
    agent = ppo(discount=GAMMA, gae_lambda=LAMBDA, **BASELINE)
    batch = transitions([1.0, 0.0, -1.0, 2.0, 0.5, 1.0], [0, 0, 1, 0, 0, 2])
    with torch.no_grad():
        values = agent.baseline(batch.states).numpy()
        next_values = agent.baseline(batch.next_states).numpy()
    assert not np.allclose(values, values[0])
    expected = gae(batch.reward.numpy(), values, next_values, batch.terminal.numpy(), GAMMA, LAMBDA)
    advantages, returns = advantages_of(agent, batch)
    assert advantages == pytest.approx(expected, abs=1e-6)
    assert returns == pytest.approx(expected + values, abs=1e-6)


@pytest.mark.parametrize("mode", ["states", "network"])
def test_next_values_come_from_the_following_rows_and_the_baseline_runs_only_on_the_rest(mode):
    """Rows 0-1 and 3 are followed by their next steps, row 2 ends an episode (its next value counts for nothing),
    row 4 is cut (its next state is not the next row's) and row 5 is the last: the baseline sees rows 4 and 5."""
    agent = ppo(discount=GAMMA, gae_lambda=LAMBDA, baseline_mode=mode, baseline={"type": "mlp", "sizes": [8]})
    states = torch.tensor([[0.1], [0.2], [0.3], [0.4], [0.5], [0.6]])
    after = torch.tensor([[0.2], [0.3], [9.0], [0.5], [0.7], [0.8]])
    batch = Transitions(
        states={"state": states},
        internals={},
        actions={"action": torch.tensor([0, 1, 0, 1, 0, 1])},
        reward=torch.ones(6),
        terminal=torch.tensor([0, 0, 1, 0, 2, 0], dtype=torch.int8),
        next_states={"state": after},
    )
    seen = []
    hook = agent.baseline.value.register_forward_hook(lambda module, inputs, output: seen.append(len(output)))
    with torch.no_grad():
        params, _, embedding = agent.policy(batch.states, {})
        values = shared_state_values(agent.baseline, mode, batch.states, embedding)
        seen.clear()
        next_values = agent._next_values(batch, values)
        assert seen == [2]
        everything = state_values(agent.baseline, mode, agent.policy, batch.next_states, {})
    hook.remove()
    used = batch.terminal != 1
    torch.testing.assert_close(next_values[used], everything[used])
    assert next_values[2] == 0.0


def test_normalized_advantages_have_mean_zero_and_unit_std_and_leave_returns_alone():
    batch = transitions([1.0, 0.0, -1.0, 2.0, 0.5, 1.0], [0, 0, 1, 0, 0, 1])
    raw_advantages, raw_returns = advantages_of(ppo(), batch)
    advantages, returns = advantages_of(ppo(normalize_advantages=True), batch)
    assert advantages == pytest.approx((raw_advantages - raw_advantages.mean()) / raw_advantages.std(ddof=1), abs=1e-6)
    assert returns == pytest.approx(raw_returns)


def test_normalized_advantages_center_the_surrogate():
    # at ratio 1 the surrogate is the mean advantage: normalized, it is 0
    agent = ppo(normalize_advantages=True)
    data = agent._with_advantages(transitions([1.0, 2.0, 3.0, 4.0], [0, 0, 0, 1]))
    assert agent._policy_loss(data).item() == pytest.approx(0.0, abs=1e-6)
    info = agent._statistics(data, agent.clipping)
    assert info["approx_kl"] == pytest.approx(0.0, abs=1e-7)
    assert info["clip_fraction"] == 0.0


def test_sequence_windows_are_cut_at_their_ends():
    # two windows of length 3 from one episode: returns must not run from the first window into the second
    agent = ppo(discount=0.5, update_mode={"unit": "sequences", "batch_size": 2, "length": 3})
    _, returns = advantages_of(agent, transitions([1.0] * 6, [0] * 6))
    assert returns.tolist() == [1.75, 1.5, 1.0, 1.75, 1.5, 1.0]


# ---------------------------------------------------------------- optimization


def count_steps(agent):
    """The row count of every optimizer step's loss, by optimizer, as lists that grow (and the policy's states of
    each step). Counted at the losses, which each step evaluates once, whether the policy's and the baseline's
    steps share a backward pass or not; the report's pass over the batch (``forward`` given) is not a step."""
    sizes = {"policy": [], "baseline": []}
    rows = []
    for name, attribute in (("policy", "_policy_loss"), ("baseline", "_baseline_loss")):
        loss = getattr(agent, attribute)

        def counted(data, reference=None, _loss=loss, _name=name, **kwargs):
            if "forward" not in kwargs:
                sizes[_name].append(len(data["reward"]))
                if _name == "policy":
                    rows.append(data["states/state"].view(-1))
            return _loss(data, reference, **kwargs)

        setattr(agent, attribute, counted)
    return sizes, rows


def test_2018_style_runs_optimization_steps_on_subsamples_and_the_baseline_once_on_the_batch():
    agent = ppo(subsampling_fraction=0.25, optimization_steps=7, **BASELINE)
    sizes, _ = count_steps(agent)
    log = recording(agent)
    run(agent, ENV, 2)
    ((batch, _),) = log
    assert len(batch) == 20  # two episodes of 10 steps
    assert sizes == {"policy": [5] * 7, "baseline": [20]}  # as 2018's pg_model: the baseline optimizer once


@pytest.mark.parametrize("minibatch_size, expected", [(8, [8, 8, 4] * 3), (None, [20] * 3)])
def test_epochs_pass_over_shuffled_minibatches(minibatch_size, expected):
    agent = ppo(epochs=3, minibatch_size=minibatch_size, **BASELINE)
    sizes, rows = count_steps(agent)
    log = recording(agent)
    run(agent, ENV, 2)
    ((batch, _),) = log
    assert sizes == {"policy": expected, "baseline": expected}
    steps_per_epoch = len(expected) // 3
    for epoch in range(3):  # each epoch sees every row exactly once
        seen = torch.cat(rows[epoch * steps_per_epoch : (epoch + 1) * steps_per_epoch])
        assert torch.equal(seen.sort().values, batch.states["state"].view(-1).sort().values)


def test_update_info_has_the_policy_loss_entropy_and_baseline_loss():
    agent = ppo(entropy_regularization=0.01, **BASELINE)
    log = recording(agent)
    run(agent, ENV, 2)
    ((batch, info),) = log
    assert {"policy_loss", "entropy", "approx_kl", "clip_fraction", "baseline_loss"} <= set(info)
    with torch.no_grad():
        params, _, _ = agent.policy(batch.states, batch.internals)
        assert info["entropy"] == pytest.approx(agent.policy.entropy(params).mean().item(), rel=1e-5)
    assert 0.0 < info["entropy"] <= math.log(2) + 1e-6
    assert all(np.isfinite(value) for value in info.values())


def counting_forwards(agent):
    """The row counts of every pass of the agent's policy network, as a list that grows."""
    forward, rows = agent.policy.forward, []

    def count(states, internals, *args, **kwargs):
        rows.append(len(next(iter(states.values()))))
        return forward(states, internals, *args, **kwargs)

    agent.policy.forward = count
    return rows


def test_an_update_nobody_reads_skips_its_report():
    # two agents alike; one update each on the same batch, reported or not: the same parameters after it, and the
    # unreported one leaves out the report's pass of the updated policy over the whole batch
    agents = [ppo(entropy_regularization=0.01, epochs=2, minibatch_size=3, **BASELINE) for _ in range(2)]
    batch = transitions([1.0, 0.0, 1.0, 0.5, -1.0, 2.0], [0, 0, 1, 0, 0, 1])
    passes = [counting_forwards(agent) for agent in agents]
    torch.manual_seed(1)  # the minibatches' shuffle
    reported = agents[0]._learn(batch, report=True)
    torch.manual_seed(1)
    quiet = agents[1]._learn(batch, report=False)
    assert {"policy_loss", "entropy", "approx_kl", "clip_fraction", "baseline_loss"} <= set(reported)
    assert quiet == {}
    assert passes[0] == [6, 3, 3, 3, 3, 6] and passes[1] == [6, 3, 3, 3, 3]  # old log-probs, 4 minibatches, report
    for mine, theirs in zip(agents[0].policy.parameters(), agents[1].policy.parameters(), strict=True):
        assert torch.equal(mine, theirs)
    assert agents[1].reporting  # only the update under way goes unreported


def test_updates_without_summaries_are_not_reported_and_with_them_are(tmp_path):
    quiet = ppo(epochs=1)
    summarized = ppo(epochs=1, summarizer={"directory": str(tmp_path), "steps": 1})
    for agent in (quiet, summarized):
        passes = counting_forwards(agent)  # acting takes a path of its own
        run(agent, ENV, 2)  # one update, on 2 episodes
        assert len(passes) == (3 if agent is summarized else 2)  # old log-probs, one step[, the report]


IMAGE = {"type": "uint8", "shape": (6, 6, 2)}
CONV = [{"type": "divide", "scale": 255}, {"type": "conv2d", "size": 3, "window": 3}, {"type": "flatten"}]


def image_batch(rows):
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (rows, 6, 6, 2), dtype=torch.uint8, generator=generator)
    return Transitions(
        states={"state": images},
        internals={},
        actions={"action": torch.arange(rows) % 2},
        reward=torch.ones(rows),
        terminal=torch.zeros(rows, dtype=torch.int8),
        next_states={"state": images.roll(-1, 0)},
    )


@pytest.mark.parametrize("pass_bytes", [72 * 5, 72 * 64])  # 72 bytes an image: 5 rows a chunk, or all 20 at once
def test_the_collecting_policy_runs_large_states_in_chunks_of_rows(monkeypatch, pass_bytes):
    monkeypatch.setattr("torchforce.agents.policy_gradient.PASS_BYTES", pass_bytes)
    env = make("minimal", action_type="int")
    agent = create_agent(
        {"type": "ppo", "network": CONV, "baseline_mode": "network", "baseline": {"type": "mlp", "sizes": []}},
        states=IMAGE,
        actions=env.actions,
    )
    batch = image_batch(20)
    passes = counting_forwards(agent)
    with torch.no_grad():
        log_prob, values = agent._collecting_policy(batch)
        params, _, embedding = agent.policy.__class__.forward(agent.policy, batch.states, batch.internals)
        whole_log_prob = agent.policy.log_prob(params, batch.actions)
        whole_values = shared_state_values(agent.baseline, "network", batch.states, embedding)
    assert passes == ([5, 5, 5, 5] if pass_bytes == 72 * 5 else [20])
    torch.testing.assert_close(log_prob, whole_log_prob, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(values, whole_values, rtol=1e-6, atol=1e-7)


def test_vector_states_run_in_one_pass_exactly_as_before():
    agent = ppo(**BASELINE)
    batch = transitions([1.0] * 300, [0] * 299 + [1], states=np.linspace(-1, 1, 300))
    passes = counting_forwards(agent)
    with torch.no_grad():
        log_prob, values = agent._collecting_policy(batch)
        params, _, _ = agent.policy.__class__.forward(agent.policy, batch.states, batch.internals)
    assert passes == [300]
    assert torch.equal(log_prob, agent.policy.log_prob(params, batch.actions))
    assert torch.equal(values, agent.baseline(batch.states))


# ---------------------------------------------------------------- baselines


def test_network_mode_baseline_reads_the_detached_policy_embedding():
    agent = ppo(baseline_mode="network", baseline={"type": "mlp", "sizes": [4]})
    assert agent.baseline.network.dense0.weight.shape == (4, 8)  # the embedding of the dense-8 policy network
    batch = transitions([1.0, 0.0, 1.0], [0, 0, 1])
    data = {**batch.flat(), "returns": torch.tensor([1.0, 2.0, 3.0])}
    loss = agent._baseline_loss(data)
    gradients = torch.autograd.grad(loss, list(agent.policy.parameters()), allow_unused=True)
    assert all(gradient is None for gradient in gradients)  # the baseline never trains the policy
    log = recording(agent)
    run(agent, ENV, 2)
    assert len(log) == 1 and np.isfinite(log[0][1]["baseline_loss"])


@pytest.mark.parametrize("mode", ["network", "states"])
def test_value_loss_weight_adds_the_weighted_value_loss_and_one_optimizer_steps_both(mode):
    baseline = {"type": "mlp", "sizes": [] if mode == "network" else [4]}
    joint = ppo(baseline_mode=mode, baseline=baseline, value_loss_weight=0.7)
    assert joint.baseline_optimizer is None and set(joint.optimizers()) == {"step_optimizer"}
    data, _ = surrogate_batch(joint)
    data["returns"] = torch.tensor([1.0, -2.0, 0.5, 3.0, 0.0])
    with torch.no_grad():
        params, _, embedding = joint.policy({"state": data["states/state"]}, {})
        values = joint.baseline({"embedding": embedding} if mode == "network" else {"state": data["states/state"]})
    value_loss = 0.5 * (values - data["returns"]).pow(2).mean().item()
    surrogate = (1.2 + 0.5 - 1.5 - 0.8 + 2.2) / 5  # as in test_clipped_surrogate_by_hand
    loss = joint._policy_loss(data)
    assert loss.item() == pytest.approx(-surrogate + 0.7 * value_loss, rel=1e-5)
    # the value loss reaches the baseline, and in network mode the policy's network (a shared torso)
    torso = joint.policy.network.dense0.weight
    gradients = torch.autograd.grad(loss, [torso, joint.baseline.value.weight])
    assert gradients[1].abs().sum() > 0
    plain = ppo(baseline_mode=mode, baseline=baseline)
    plain.load_state_dict(joint.state_dict() | {"optimizers": plain.state_dict()["optimizers"]})
    (policy_gradient,) = torch.autograd.grad(plain._policy_loss(data), [plain.policy.network.dense0.weight])
    assert torch.allclose(gradients[0], policy_gradient) == (mode == "states")
    before = {name: p.detach().clone() for name, p in joint.baseline.named_parameters()}
    log = recording(joint)
    run(joint, ENV, 2)
    assert len(log) == 1 and np.isfinite(log[0][1]["baseline_loss"])
    assert all(not torch.equal(before[name], p) for name, p in joint.baseline.named_parameters())


MULTI = make("multi", action_types=["int"])
MULTI_NETWORK = [
    [
        {"type": "input", "names": "int"},
        {"type": "embedding", "indices": 3, "size": 4},
        {"type": "output", "name": "int_embedding"},
    ],
    [{"type": "input", "names": ["float", "int_embedding"]}, {"type": "dense", "size": 8}],
]
INT_BASELINE = {"type": "custom", "network": [{"type": "embedding", "indices": 3, "size": 4}]}


@pytest.mark.parametrize(
    "baseline, multi",
    [
        ({"type": "mlp", "sizes": [8, 8]}, False),
        ({"type": "custom", "network": [{"type": "dense", "size": 8}, {"type": "dense", "size": 4}]}, False),
        ([{"type": "dense", "size": 8}], False),  # a bare layer list is a custom baseline
        ({"type": "aggregated", "baselines": {"float": {"type": "mlp", "sizes": [8]}, "int": INT_BASELINE}}, True),
        ({"float": {"type": "mlp", "sizes": [8]}, "int": INT_BASELINE}, True),  # 2018: keyed by state names
    ],
)
def test_baseline_kinds_train(baseline, multi):
    env, network = (MULTI, MULTI_NETWORK) if multi else (ENV, NETWORK)
    agent = ppo(env=env, network=network, baseline_mode="states", baseline=baseline, gae_lambda=0.95)
    if multi:
        assert set(agent.baseline.parts) == {"float", "int"}
    before = {name: p.detach().clone() for name, p in agent.baseline.named_parameters()}
    log = recording(agent)
    run(agent, env, 2)
    assert len(log) == 1 and np.isfinite(log[0][1]["baseline_loss"])
    unchanged = [name for name, p in agent.baseline.named_parameters() if torch.equal(before[name], p)]
    assert not unchanged, f"the baseline optimizer did not move {unchanged}"


@pytest.mark.parametrize(
    "baseline",
    [
        {"type": "mlp", "sizes": [8]},
        {"type": "custom", "network": [{"type": "dense", "size": 8}]},
        {"type": "cnn", "conv_sizes": [], "dense_sizes": [8]},
    ],
)
def test_value_weights_initialize_the_value_head(baseline):
    orthogonal = {"name": "orthogonal", "gain": 3.0}
    agent = ppo(baseline_mode="states", baseline={**baseline, "value_weights": orthogonal})
    assert agent.baseline.value.weight.norm().item() == pytest.approx(3.0)  # one orthonormal row times the gain
    constant = ppo(baseline_mode="states", baseline={**baseline, "value_weights": 0.5})
    assert constant.baseline.value.weight.eq(0.5).all()
    with pytest.raises(SpecError, match=r"baseline\.value_weights\.name: "):
        ppo(baseline_mode="states", baseline={**baseline, "value_weights": "orthonormal"})


def test_sb3_style_orthogonal_initialization_from_a_spec_trains():
    """A torso at gain sqrt(2), the policy head at 0.01 and the value head at 1, as SB3's ortho_init does."""
    torso = {"name": "orthogonal", "gain": math.sqrt(2)}
    agent = ppo(
        network=[{"type": "dense", "size": 8, "weights": torso}],
        distributions={"action": {"type": "categorical", "weights": {"name": "orthogonal", "gain": 0.01}}},
        baseline_mode="network",
        baseline={"type": "mlp", "sizes": [], "value_weights": {"name": "orthogonal", "gain": 1.0}},
        value_loss_weight=1.0,
    )
    logits = agent.policy.heads["action"].logits.weight
    assert logits.norm(dim=1).tolist() == pytest.approx([0.01] * logits.shape[0])
    torso = agent.policy.network.dense0.weight  # [8, 1]: more rows than columns, so the column is orthonormal
    assert torso.norm().item() == pytest.approx(math.sqrt(2))
    log = recording(agent)
    run(agent, ENV, 2)
    assert len(log) == 1 and np.isfinite(log[0][1]["baseline_loss"])


# ---------------------------------------------------------------- update modes


@pytest.mark.parametrize(
    "update_mode, rows",
    [
        ({"unit": "episodes", "batch_size": 2}, 20),
        ({"unit": "timesteps", "batch_size": 8, "frequency": 8}, 8),
        ({"unit": "sequences", "batch_size": 3, "length": 4, "frequency": 5}, 12),
    ],
)
def test_update_units_run(update_mode, rows):
    agent = ppo(update_mode=update_mode, gae_lambda=0.95, **BASELINE)
    log = recording(agent)
    run(agent, ENV, 3)
    assert log and all(len(batch) == rows for batch, _ in log)
    assert all(np.isfinite(info["policy_loss"]) for _, info in log)
    if update_mode["unit"] != "episodes":  # a segment cut for the update bootstraps: it ends with terminal 2
        assert any(2 in batch.terminal.tolist() for batch, _ in log)


@pytest.mark.parametrize(
    "update_mode",
    [
        {"unit": "sequences", "batch_size": 1, "length": 8, "frequency": 1},  # 8 rows for one window
        {"unit": "timesteps", "batch_size": 4, "first_update": 25},  # 28 rows staged before the first update
    ],
)
def test_default_memory_holds_what_is_staged_before_an_update(update_mode):
    agent = ppo(update_mode=update_mode, optimization_steps=2)
    run(agent, ENV, 3)
    assert agent.updates > 0


# ---------------------------------------------------------------- spec errors


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {"update_mode": {"unit": "timesteps", "batch_size": 8}, "memory": {"type": "replay", "capacity": 100}},
            "memory.type: PPO updating on timesteps learns from the most recent ones; expected "
            '"latest", got "replay".\n'
            '  Use {"type": "latest"}, or update_mode.unit "episodes".',
        ),
        ({"subsampling_fraction": 0.0}, "subsampling_fraction: out of range; expected a number in (0, 1], got 0.0."),
        ({"subsampling_fraction": 1.5}, "subsampling_fraction: out of range; expected a number in (0, 1], got 1.5."),
        ({"optimization_steps": 0}, "optimization_steps: out of range; expected an integer >= 1, got 0."),
        ({"epochs": 0}, "epochs: out of range; expected an integer >= 1, got 0."),
        ({"epochs": 2, "minibatch_size": 0}, "minibatch_size: out of range; expected an integer >= 1, got 0."),
        ({"minibatch_size": 8}, "minibatch_size: goes with 'epochs'.\n  Set epochs too, or use subsampling_fraction."),
        ({"discount": 1.5}, "discount: out of range; expected a number in [0.0, 1.0], got 1.5."),
        (
            {"entropy_regularization": -1},
            "entropy_regularization: out of range; expected a number in [0.0, inf], got -1.",
        ),
        ({"gae_lambda": 1.5, **BASELINE}, "gae_lambda: out of range; expected a number in [0.0, 1.0], got 1.5."),
        (
            {"likelihood_ratio_clipping": -0.2},
            "likelihood_ratio_clipping: out of range; expected a number in [0.0, inf], got -0.2.",
        ),
        (
            {"normalize_advantages": 1},
            'normalize_advantages: not a boolean or a mode; expected true, false or "minibatch", got 1.',
        ),
        ({"normalize_advantages": "batch"}, "normalize_advantages: not a boolean or a mode"),
        ({"step_optimizer": {"type": "adamm"}}, 'step_optimizer.type: unknown optimizer "adamm".'),
        (
            {"baseline_mode": "state", "baseline": {"type": "mlp", "sizes": [8]}},
            "baseline_mode: unknown value; expected one of 'states', 'network', got \"state\".\n  Did "
            "you mean 'states'?",
        ),
        (
            {"baseline": {"type": "mlp", "sizes": [8]}},
            'baseline_mode: baseline needs a baseline_mode; expected "states" or "network", got null.',
        ),
        (
            {"gae_lambda": 0.9},
            'baseline_mode: gae_lambda needs a baseline_mode; expected "states" or "network", got null.',
        ),
        (
            {"baseline": [{"type": "dense", "size": 8}], "baseline_optimizer": {"type": "adam"}},
            "baseline_mode: baseline and baseline_optimizer need a baseline_mode; "
            'expected "states" or "network", got null.',
        ),
        (
            {"baseline_mode": "states"},
            'baseline: a baseline_mode needs a baseline spec.\n  For example {"type": "mlp", "sizes": [64, 64]}.',
        ),
        ({"baseline_mode": "states", "baseline": {"type": "mlpp"}}, 'baseline.type: unknown baseline "mlpp".'),
        (
            {"baseline_mode": "states", "baseline": {"type": "mlp"}},
            """baseline: baseline 'mlp' needs 'sizes'; got {"type": "mlp"}.""",
        ),
        (
            {"baseline_mode": "states", "baseline": {"type": "mlp", "sizes": 32}},
            "baseline.sizes: not a list of layer sizes; expected a list like [32, 32], got 32.",
        ),
        (
            {"baseline_mode": "states", "baseline": {"type": "mlp", "sizes": [8, 0]}},
            "baseline.sizes[1]: out of range; expected an integer >= 1, got 0.",
        ),
        (
            {"baseline_mode": "states", "baseline": {"type": "aggregated", "baselines": {}}},
            "baseline.baselines: needs a baseline for at least one state; expected a dict keyed by "
            "state names (state), "
            "got {}.",
        ),
        (
            {"baseline_mode": "states", "baseline": {"type": "aggregated", "baselines": [8]}},
            "baseline.baselines: not a dict; expected a JSON object, got [8].",
        ),
        (
            {"baseline_mode": "states", "baseline": {"type": "aggregated", "baselines": {"position": [8]}}},
            'baseline.baselines.position: unknown state "position".',
        ),
        (
            {"baseline_mode": "states", "baseline_optimizer": {"type": "adamm"}, "baseline": [{"type": "dense"}]},
            'baseline_optimizer.type: unknown optimizer "adamm".',
        ),
        (
            {"value_loss_weight": 0.5},
            "value_loss_weight: weighs the baseline's loss, and there is no baseline; got 0.5.",
        ),
        (
            {"value_loss_weight": 0.5, "baseline_mode": "states", "baseline_optimizer": "adam"},
            "baseline_optimizer: unused: with value_loss_weight the baseline steps with step_optimizer; "
            'expected null, got "adam".',
        ),
    ],
)
def test_spec_errors(options, message):
    with pytest.raises(SpecError) as error:
        ppo(**options)
    assert str(error.value).startswith("agent." + message)


@pytest.mark.parametrize("unit", ["episodes", "timesteps"])
def test_reset_mid_episode_ends_it_instead_of_merging_it_into_the_next(unit):
    agent = ppo(update_mode={"unit": unit, "batch_size": 50})
    for t, x in enumerate([0.0, 0.1, 0.2, 0.3, 0.4, 0.5]):
        if t == 3:
            agent.reset()  # the episode of 0.0-0.2 is abandoned; 0.2 never got its next state
        agent.act(np.array([x], dtype=np.float32))
        agent.observe(terminal=1 if t == 5 else 0, reward=float(t))
    agent._store(agent.episodes.flush())  # what an update on timesteps writes first
    stored = agent.memory.retrieve_timesteps(10)
    np.testing.assert_allclose(stored["states/state"][:, 0], [0.0, 0.1, 0.3, 0.4, 0.5])
    np.testing.assert_allclose(stored["next_states/state"][:, 0], [0.1, 0.2, 0.4, 0.5, 0.5])
    assert stored["terminal"].tolist() == [0, 2, 0, 0, 1]
    assert stored["reward"].tolist() == [0.0, 1.0, 3.0, 4.0, 5.0]


@pytest.mark.parametrize(
    "optimizer", [{"type": "adam", "learning_rate": 1e-2}, {"type": "rmsprop", "learning_rate": 1e-2}]
)
def test_steps_sharing_a_backward_pass_equal_separate_steps(optimizer):
    """A baseline network of its own: the policy's and the baseline's steps on a minibatch take their gradients from
    one backward pass, and end where two passes, one a step, end (the same parameters bit for bit)."""
    options = {
        **BASELINE,
        "epochs": 3,
        "minibatch_size": 8,
        "step_optimizer": {**optimizer, "clip_grad_norm": 0.5},
        "baseline_optimizer": {**optimizer, "clip_grad_norm": 0.5},
    }
    shared, apart = ppo(**options), ppo(**options)
    assert shared._shared_backward
    apart._shared_backward = False
    for agent in (shared, apart):
        torch.manual_seed(0)  # the minibatches' order is drawn from torch's global generator
        run(agent, ENV, 4)
    assert shared.updates == apart.updates == 2
    for ours, theirs in zip(
        [*shared.policy.parameters(), *shared.baseline.parameters()],
        [*apart.policy.parameters(), *apart.baseline.parameters()],
        strict=True,
    ):
        assert torch.equal(ours, theirs)
    assert not torch.equal(next(shared.baseline.parameters()), next(ppo(**options).baseline.parameters()))


@pytest.mark.parametrize(
    "options",
    [
        {"baseline_mode": "network", "baseline": {"type": "mlp", "sizes": [8]}},  # V(s) on the policy's embedding
        {**BASELINE, "value_loss_weight": 0.5},  # one optimizer for both losses
        {**BASELINE, "subsampling_fraction": 0.5, "optimization_steps": 4},  # 2018: the baseline once, on the batch
    ],
)
def test_steps_share_a_backward_pass_only_where_neither_loss_reads_the_other_s_parameters(options):
    assert not ppo(**options)._shared_backward


def test_the_losses_carry_the_networks_weight_penalties():
    """The policy's and the baseline's losses each add their network's l2 penalty (and nothing where none is set)."""
    dense, l2 = [{"type": "dense", "size": 8}], [{"type": "dense", "size": 8, "l2_regularization": 0.5}]
    plain = ppo(network=dense, baseline_mode="states", baseline=dense)
    penalized = ppo(network=l2, baseline_mode="states", baseline=l2)
    log = recording(plain)
    run(plain, ENV, 2)
    ((batch, _),) = log
    for module in ("policy", "baseline"):  # the same weights as the plain agent's after its update
        getattr(penalized, module).load_state_dict(getattr(plain, module).state_dict())
    data = plain._with_advantages(batch)
    for loss, module in (("_policy_loss", "policy"), ("_baseline_loss", "baseline")):
        assert not getattr(plain, module).has_penalties
        with torch.no_grad():
            penalty = getattr(penalized, module).regularization_loss()
            assert penalty.item() > 0.0
            expected = getattr(plain, loss)(data) + penalty
            assert getattr(penalized, loss)(data).item() == pytest.approx(expected.item(), rel=1e-6)
