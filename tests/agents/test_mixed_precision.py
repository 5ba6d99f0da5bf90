"""``mixed_precision: "bfloat16"``: every network of an agent (policy, baseline, critic, targets) computes its matrix
products and convolutions in bfloat16 under torch.autocast, while parameters, optimizer state, the heads, the
distributions and the losses stay float32. Checked by recording, for every ``F.linear``/``F.conv2d`` call while
agents act and update, whether its weight belongs to a network and what dtype it returned."""

import platform
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import torchforce.core.networks
from tests.agents.test_host_reads import IMAGE_PPO
from torchforce.agents import create_agent
from torchforce.core.networks import Network, cpu_bfloat16_native
from torchforce.environments import make
from torchforce.export import export_policy
from torchforce.spec import SpecError

SLOW = 'mixed_precision "bfloat16": this CPU has no bfloat16 instructions'
# the other tests run on whatever CPU this is: below, the warning is checked where it is the point
pytestmark = pytest.mark.filterwarnings(f"ignore:{SLOW.replace(':', '.')}")  # a filter's fields are split at colons

IMAGE_STATES = {"type": "uint8", "shape": (32, 32, 4)}
THREE_ACTIONS = {"type": "int", "num_actions": 3}
REPLAY = {
    "update_mode": {"unit": "timesteps", "batch_size": 8, "frequency": 4},
    "memory": {"type": "replay", "capacity": 64},
    "target_sync_frequency": 8,
}
MLP = [{"type": "dense", "size": 16}, {"type": "dense", "size": 16}]
CASES = {
    # (agent spec, states, actions): image agents on random frames, float-action agents on the minimal environment
    "ppo-image": (IMAGE_PPO, IMAGE_STATES, THREE_ACTIONS),
    "dqn-image": ({"type": "dqn", "network": IMAGE_PPO["network"], **REPLAY, "seed": 1}, IMAGE_STATES, THREE_ACTIONS),
    "vpg-baseline": (
        {
            "type": "vpg",
            "network": MLP,
            "update_mode": {"unit": "timesteps", "batch_size": 8, "frequency": 8},
            "baseline_mode": "states",
            "baseline": {"type": "mlp", "sizes": [16]},
            "seed": 2,
        },
        None,
        None,
    ),
    "ddpg": ({"type": "ddpg", "network": MLP, **REPLAY, "seed": 3}, None, None),
    "naf": ({"type": "naf", "network": MLP, **REPLAY, "seed": 4}, None, None),
}


def build(case: str, **changes):
    spec, states, actions = CASES[case]
    if states is None:
        environment = make("minimal", action_type="float")
        states, actions = environment.states, environment.actions
    return create_agent({**spec, **changes}, states=states, actions=actions)


def drive(agent, steps: int = 40) -> None:
    """Acting and observing on a fixed stream of random states (frames or floats), updates included."""
    rng = np.random.default_rng(0)
    spec = agent.states_spec["state"]
    for step in range(steps):
        if spec.type == "uint8":
            state = rng.integers(0, 256, spec.shape, dtype=np.uint8)
        else:
            state = rng.uniform(-1.0, 1.0, spec.shape).astype(np.float32)
        agent.act(state)
        agent.observe(terminal=(step + 1) % 10 == 0, reward=float(rng.normal()))


def networks(agent) -> list[Network]:
    return [
        module
        for root in agent.trainable_modules().values()
        for module in root.modules()
        if isinstance(module, Network)
    ]


def recorded_dtypes(agent, monkeypatch) -> tuple[set[torch.dtype], set[torch.dtype]]:
    """The dtypes the matrix products and convolutions returned while ``agent`` acted and updated: those with a
    network's weight, and the others (heads)."""
    inside = {id(parameter) for network in networks(agent) for parameter in network.parameters()}
    seen: tuple[set[torch.dtype], set[torch.dtype]] = (set(), set())

    def recording(function):
        def call(input, weight, *args, **kwargs):
            output = function(input, weight, *args, **kwargs)
            seen[0 if id(weight) in inside else 1].add(output.dtype)
            return output

        return call

    monkeypatch.setattr(F, "linear", recording(F.linear))
    monkeypatch.setattr(F, "conv2d", recording(F.conv2d))
    drive(agent)
    monkeypatch.undo()
    assert agent.updates > 0
    return seen


@pytest.mark.parametrize("case", list(CASES))
def test_networks_compute_in_bfloat16_and_everything_else_in_float32(case, monkeypatch):
    agent = build(case, mixed_precision="bfloat16")
    assert networks(agent) and all(network.autocast_dtype is torch.bfloat16 for network in networks(agent))
    before = agent.get_parameters()
    in_networks, elsewhere = recorded_dtypes(agent, monkeypatch)
    assert in_networks == {torch.bfloat16}
    assert elsewhere == {torch.float32}  # the heads (policy, value, critic's Q, NAF's), on float32 embeddings
    after = agent.get_parameters()
    assert all(value.dtype == torch.float32 for value in after.values())
    assert any(not torch.equal(before[name], after[name]) for name in before), "the updates changed nothing"
    optimizer_state = [
        value
        for optimizer in agent.optimizers().values()
        for state in getattr(getattr(optimizer, "optimizer", None), "state", {}).values()
        for value in state.values()
        if isinstance(value, torch.Tensor) and value.is_floating_point()
    ]
    assert all(value.dtype == torch.float32 for value in optimizer_state)


def test_float32_throughout_by_default(monkeypatch):
    agent = build("ppo-image")
    assert all(network.autocast_dtype is None for network in networks(agent))
    assert recorded_dtypes(agent, monkeypatch) == ({torch.float32}, {torch.float32})


def test_a_bfloat16_update_follows_the_float32_one():
    """The same agent and rows, updated once in each precision: every parameter moves the same way, up to
    bfloat16's rounding (8 bits of mantissa) of the networks' products."""
    moves = {}
    for precision in (None, "bfloat16"):
        agent = build("ppo-image", mixed_precision=precision)
        before = agent.get_parameters()
        drive(agent, steps=13)  # one update, of the first 12 rows (the 13th act completes the 12th)
        assert agent.updates == 1
        after = agent.get_parameters()
        moves[precision] = {name: (after[name] - before[name]).flatten() for name in before}
    for name, move in moves[None].items():
        if move.abs().max() > 0:
            cosine = F.cosine_similarity(move, moves["bfloat16"][name], dim=0)
            assert cosine > 0.95, f"{name}: the bfloat16 update points elsewhere (cosine {cosine:.3f})"


def test_the_precision_is_checked_and_recorded():
    with pytest.raises(SpecError) as error:
        build("ppo-image", mixed_precision="float16")
    assert error.value.path == "agent.mixed_precision" and "bfloat16" in str(error.value)
    assert build("ppo-image", mixed_precision="bfloat16").spec["mixed_precision"] == "bfloat16"
    assert build("ppo-image").spec["mixed_precision"] is None


def test_an_exported_policy_computes_in_float32(tmp_path):
    agent = build("ppo-image", mixed_precision="bfloat16")
    drive(agent, steps=13)
    path = export_policy(agent, tmp_path / "policy.pt")
    assert agent.policy.network.autocast_dtype is torch.bfloat16  # the agent's own network is left as it was
    frames = torch.from_numpy(np.random.default_rng(1).integers(0, 256, (5, 32, 32, 4), dtype=np.uint8))
    exported = torch.jit.load(str(path))
    agent.policy.network.autocast_dtype = None
    with torch.no_grad():
        embedding, _ = agent.policy.network({"state": frames}, {})
        expected = agent.policy.heads["action"](embedding)[0].argmax(-1)
    assert torch.equal(exported(frames), expected)


@pytest.mark.parametrize("native", [True, False, None])
def test_a_cpu_without_bfloat16_instructions_is_named_and_still_computes(native, monkeypatch):
    """Without AVX512-BF16 or AMX torch computes bfloat16 in software, several times slower: the agent says so,
    and still builds (a checkpoint moved to such a machine restores). A CPU with them, or one torch cannot tell
    about, and float32 on any CPU, say nothing."""
    monkeypatch.setattr(torchforce.core.networks, "cpu_bfloat16_native", lambda: native)
    if native is False:
        with pytest.warns(UserWarning, match=SLOW) as caught:
            agent = build("ppo-image", mixed_precision="bfloat16")
        assert "Use null (float32) here" in str(caught[0].message)
        assert caught[0].filename == __file__  # the line that built the agent, through create_agent
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            agent = build("ppo-image", mixed_precision="bfloat16")
    assert all(network.autocast_dtype is torch.bfloat16 for network in networks(agent))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build("ppo-image")


def test_cpu_bfloat16_native_reads_the_instructions_torch_reports(monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    for avx512_bf16, amx, expected in ((True, False, True), (False, True, True), (False, False, False)):
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda value=avx512_bf16: value, raising=False)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda value=amx: value, raising=False)
        assert cpu_bfloat16_native() is expected
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")
    assert cpu_bfloat16_native() is None  # a torch that cannot tell
    monkeypatch.setattr(platform, "machine", lambda: "arm64")
    assert cpu_bfloat16_native() is None
