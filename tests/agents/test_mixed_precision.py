"""``mixed_precision: "bfloat16"``: every network of an agent (policy, baseline, critic, targets) computes its matrix
products and convolutions in bfloat16 under torch.autocast, while parameters, optimizer state, the heads, the
distributions and the losses stay float32. Checked by recording, for every ``F.linear``/``F.conv2d`` call while
agents act and update, whether its weight belongs to a network and what dtype it returned. A pass without gradients
reuses each layer's casts of its weights until they change (``Layer.weight_and_bias``): the same numbers as
autocast's casts on every call, checked layer by layer and over whole training runs."""

import copy
import pickle
import platform
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import torchforce.core.networks
from tests.agents.test_host_reads import IMAGE_PPO
from torchforce.agents import create_agent
from torchforce.core.networks import Network, build_network, cpu_bfloat16_native, set_autocast
from torchforce.core.networks.base import Layer
from torchforce.core.optimizers import build_optimizer
from torchforce.environments import make
from torchforce.export import export_policy
from torchforce.spec import SpecError, normalize_states

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

    def in_a_network(weight) -> bool:  # a network's parameter, or a layer's cast of one
        casts = (
            copies.weight_cast for network in networks(agent) for copies in cast_copies(network).values() if copies
        )
        return id(weight) in inside or any(weight is cast for cast in casts)

    def recording(function):
        def call(input, weight, *args, **kwargs):
            output = function(input, weight, *args, **kwargs)
            seen[0 if in_a_network(weight) else 1].add(output.dtype)
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
    assert build("ppo-image", mixed_precision="auto").spec["mixed_precision"] == "auto"


@pytest.mark.parametrize("native", [True, False, None])
def test_auto_trains_as_bfloat16_where_the_cpu_has_its_instructions_and_as_float32_elsewhere(native, monkeypatch):
    """``"auto"`` on a CPU with AVX512-BF16 or AMX is ``"bfloat16"``, on any other (or one torch cannot tell about)
    float32, without a warning either way: the same parameters, bit for bit, after the same updates. The spec keeps
    "auto", so a checkpoint moved to another machine chooses again there."""
    monkeypatch.setattr(torchforce.core.networks, "cpu_bfloat16_native", lambda: native)
    chosen = "bfloat16" if native else None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        auto = build("dqn-image", mixed_precision="auto")
    explicit = build("dqn-image", mixed_precision=chosen)
    assert (auto.precision, explicit.precision) == (chosen, chosen)
    assert all(network.autocast_dtype is (torch.bfloat16 if native else None) for network in networks(auto))
    assert auto.spec["mixed_precision"] == "auto"
    for agent in (auto, explicit):
        drive(agent)
    assert auto.updates == explicit.updates > 0
    parameters = auto.get_parameters(), explicit.get_parameters()
    assert all(torch.equal(value, parameters[1][name]) for name, value in parameters[0].items())


@pytest.mark.parametrize("supported", [True, False])
def test_auto_on_a_gpu_follows_whether_it_has_bfloat16_arithmetic(supported, monkeypatch):
    """On CUDA, "auto" asks torch whether the GPU computes bfloat16 in hardware (compute capability 8.0 on: A100,
    H100, ...); one that does not gets float32, not the error or the emulation that "bfloat16" gets there."""
    agent = build("ppo-image")
    asked = []
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda **kwargs: asked.append(kwargs) or supported)
    agent.device = torch.device("cuda")  # only the choice is made here: nothing moves to the device
    agent._set_precision("auto")
    assert agent.precision == ("bfloat16" if supported else None)
    assert all(network.autocast_dtype is (torch.bfloat16 if supported else None) for network in networks(agent))
    assert asked[0] == {"including_emulation": False}  # emulated bfloat16 (before Ampere) is slower than float32


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


# every layer with a linear map or a convolution, on the input it takes
LAYERED = {
    "image": (
        {"type": "uint8", "shape": (16, 16, 4)},
        [
            {"type": "divide", "scale": 255},
            {"type": "conv2d", "size": 8, "window": 4, "stride": 2},
            {"type": "flatten"},
            {"type": "dense", "size": 16},
            {"type": "dense", "skip": True},
            {"type": "dueling", "size": 3},
        ],
    ),
    "sequence": (
        {"type": "float", "shape": (12, 3)},
        [{"type": "conv1d", "size": 6, "window": 3}, {"type": "flatten"}, {"type": "linear", "size": 5}],
    ),
}


def layered(name: str, precision=torch.bfloat16):
    states, layers = LAYERED[name]
    network = build_network(layers, normalize_states(states)[0])
    set_autocast(network, precision)
    rng = np.random.default_rng(1)
    if states["type"] == "uint8":
        batch = torch.from_numpy(rng.integers(0, 256, (5, *states["shape"]), dtype=np.uint8))
    else:
        batch = torch.from_numpy(rng.uniform(-1.0, 1.0, (5, *states["shape"])).astype(np.float32))
    return network, {"state": batch}


def cast_copies(network) -> dict:
    return {
        name: layer.__dict__.get("_cast_copies")
        for name, layer in network.named_modules()
        if isinstance(layer, Layer) and isinstance(getattr(layer, "weight", None), torch.Tensor)
    }


def acting(network, batch) -> torch.Tensor:
    with torch.inference_mode():
        return network(batch)[0]


def casting_every_call(network, batch) -> torch.Tensor:
    """The pass as autocast computes it with gradients: its own casts of the float32 weights."""
    with torch.enable_grad():
        return network(batch)[0].detach()


@pytest.mark.parametrize("name", list(LAYERED))
def test_a_pass_without_gradients_reuses_the_layers_casts_until_a_parameter_changes(name):
    network, batch = layered(name)
    assert torch.equal(acting(network, batch), casting_every_call(network, batch))
    first = cast_copies(network)
    assert first and all(copies is not None and copies.weight_cast.dtype is torch.bfloat16 for copies in first.values())
    acting(network, batch)
    assert all(cast_copies(network)[layer] is copies for layer, copies in first.items()), "cast again"

    other, _ = layered(name)
    layer = next(module for module in network.modules() if module in (network.get_submodule(n) for n in first))

    def optimizer_step() -> None:
        optimizer = build_optimizer({"type": "adam", "learning_rate": 0.1}, list(network.parameters()))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            optimizer.minimize(network(batch)[0].float().square().mean())

    def noise() -> None:  # variable noise, or any other in-place write
        with torch.no_grad():
            for parameter in network.parameters():
                parameter.add_(0.25)

    def replaced() -> None:
        layer.weight = torch.nn.Parameter(layer.weight.detach() * 2)

    changes = {
        "an update": optimizer_step,
        "a restore": lambda: network.load_state_dict(other.state_dict()),
        "an in-place write": noise,
        "a replaced parameter": replaced,
    }
    for change, apply in changes.items():
        before = acting(network, batch)
        apply()
        after = acting(network, batch)
        assert not torch.equal(before, after), f"{change}: the pass did not change"
        assert torch.equal(after, casting_every_call(network, batch)), f"{change}: stale casts"


@pytest.mark.parametrize("duplicate", [copy.deepcopy, lambda network: pickle.loads(pickle.dumps(network))])
def test_a_copy_of_a_network_starts_without_its_casts(duplicate):
    """A copy's parameters count their versions from 0 again: casts copied with it could pass for current ones."""
    network, batch = layered("image")
    acting(network, batch)  # casts at version 0
    with torch.no_grad():
        for parameter in network.parameters():
            parameter.mul_(1.5)
    clone = duplicate(network)
    assert all(copies is None for copies in cast_copies(clone).values())
    assert torch.equal(acting(clone, batch), casting_every_call(network, batch))


def test_a_float32_network_keeps_no_casts():
    network, batch = layered("image", precision=None)
    acting(network, batch)
    assert all(copies is None for copies in cast_copies(network).values())


@pytest.mark.parametrize("case", list(CASES))
def test_an_agent_trains_the_same_as_with_a_cast_on_every_call(case, monkeypatch):
    """Acting and the targets' passes reuse the layers' casts: the same actions, updates and parameters, bit for
    bit, as autocast casting the weights on every call."""
    reusing = build(case, mixed_precision="bfloat16")
    drive(reusing)
    assert any(copies is not None for network in networks(reusing) for copies in cast_copies(network).values())
    monkeypatch.setattr(Layer, "weight_and_bias", lambda layer: (layer.weight, layer.bias))
    casting = build(case, mixed_precision="bfloat16")
    drive(casting)
    assert reusing.updates == casting.updates > 0
    expected = casting.get_parameters()
    assert all(torch.equal(value, expected[name]) for name, value in reusing.get_parameters().items())
