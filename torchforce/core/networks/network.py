"""Networks: the `Network` contract, the layered network built from a 2018 layer list, the wrapper for a user's
``torch.nn.Module``, and `build_network`, which turns any accepted spec into a `Network`.

A layered network is built once for known state shapes: each layer is constructed for the shape and dtype its
input will have, so ``output_size`` is known before any forward pass. ``forward`` then only runs a prepared list
of steps; a plain chain (one state, no input/output/recurrent layers) runs as a bare loop over its layers.
Module names are the 2018 layer scopes, type + counter (``dense0``, ``dense1``, ``conv2d0``), so state_dict keys
read like ``dense1.weight``.
"""

from __future__ import annotations

import inspect
import platform
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from torchforce.core.networks.base import SMALLER, Layer, Value
from torchforce.core.networks.layers import Dense
from torchforce.spec import (
    Registry,
    SpecError,
    StateSpec,
    check_kwargs,
    check_provided,
    import_path,
    load_spec,
    normalize_states,
    unknown_name_error,
)
from torchforce.spec.checks import expect_elements
from torchforce.spec.errors import what_it_is

LAYERS = Registry(
    "layer",
    {
        "conv1d": "torchforce.core.networks.layers:Conv1d",
        "conv2d": "torchforce.core.networks.layers:Conv2d",
        "dense": "torchforce.core.networks.layers:Dense",
        "divide": "torchforce.core.networks.layers:Divide",
        "dropout": "torchforce.core.networks.layers:Dropout",
        "dueling": "torchforce.core.networks.layers:Dueling",
        "embedding": "torchforce.core.networks.layers:Embedding",
        "flatten": "torchforce.core.networks.layers:Flatten",
        "input": "torchforce.core.networks.routing:Input",
        "internal_lstm": "torchforce.core.networks.recurrent:InternalLstm",
        "linear": "torchforce.core.networks.layers:Linear",
        "lstm": "torchforce.core.networks.recurrent:Lstm",
        "nonlinearity": "torchforce.core.networks.base:Nonlinearity",
        "output": "torchforce.core.networks.routing:Output",
        "pool2d": "torchforce.core.networks.layers:Pool2d",
        "tf_layer": "torchforce.core.networks.tf_layer:tf_layer",
    },
    base=Layer,
)

# the 2018 example networks shipped with torchforce; a bare name like "mlp2_network" names one of them
NETWORK_CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "networks"

# how a layered network calls each step
LAYER, INPUT, OUTPUT, EMIT, RECURRENT = range(5)
STEP_KINDS = {"layer": LAYER, "input": INPUT, "output": OUTPUT, "emit": EMIT, "recurrent": RECURRENT}


def _to_float(x: Tensor) -> Tensor:
    return x.float()


def _flatten(x: Tensor) -> Tensor:
    return x.reshape(x.shape[0], -1)


class Network(nn.Module):
    """What agents use: ``forward(states, internals) -> (embedding [B, output_size], next internals)``.

    ``states`` maps state names to batched tensors (float32, int64 or bool). ``internals`` maps the names in
    ``self.internals`` to recurrent state, [B, *shape]; feed-forward networks have none and return ``{}``.
    Subclass it for a custom network: set ``output_size`` and ``internals`` in ``__init__(self, *, states, ...)``.
    """

    _zero: Tensor  # a buffer

    def __init__(self) -> None:
        super().__init__()
        self.output_size: int = 0
        self.internals: dict[str, tuple[int, ...]] = {}
        # a zero that moves with the network: its device without walking the parameters on every act and loss
        self.register_buffer("_zero", torch.zeros(()), persistent=False)
        # the agent's mixed_precision: the dtype torch.autocast computes the network's matrix products and
        # convolutions in; None: float32 throughout
        self.autocast_dtype: torch.dtype | None = None

    def __call__(
        self, states: dict[str, Tensor], internals: dict[str, Tensor] | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """``forward`` through ``Module.__call__`` (hooks run), in the network's precision."""
        if self.autocast_dtype is None:
            return super().__call__(states, internals)
        return self._autocast(super().__call__, states, internals)

    def forward_unhooked(
        self, states: dict[str, Tensor], internals: dict[str, Tensor]
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """``forward`` in the network's precision, without ``Module.__call__``'s few microseconds (and its hooks):
        acting's hot path."""
        if self.autocast_dtype is None:
            return self.forward(states, internals)
        return self._autocast(self.forward, states, internals)

    def _autocast(
        self, forward: Callable[..., tuple[Tensor, dict[str, Tensor]]], states: dict[str, Tensor], internals: Any
    ) -> tuple[Tensor, dict[str, Tensor]]:
        with torch.autocast(self._zero.device.type, dtype=self.autocast_dtype):
            embedding, next_internals = forward(states, internals)
        # float32 out: the heads, distributions, losses and recurrent state computed from it keep full precision
        return embedding.float(), {name: value.float() for name, value in next_internals.items()}

    def initial_internals(self, batch_size: int) -> dict[str, Tensor]:
        """Zero recurrent state for ``batch_size`` rows, on the network's device."""
        if not self.internals:
            return {}
        device = self._zero.device
        return {name: torch.zeros((batch_size, *shape), device=device) for name, shape in self.internals.items()}

    def regularization_loss(self) -> Tensor:
        """The sum of the layers' l1/l2 penalties (a zero tensor when there are none)."""
        return self._zero.clone()

    @property
    def has_penalties(self) -> bool:
        """Whether ``regularization_loss()`` may be other than zero: a subclass that overrides it has penalties."""
        return type(self).regularization_loss is not Network.regularization_loss

    def forward(
        self, states: dict[str, Tensor], internals: dict[str, Tensor] | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        raise NotImplementedError

    def dense_chain(self) -> tuple[str, list[Dense]] | None:
        """The one state and the dense layers that are the whole network, in order (acting in NumPy:
        ``core/host_acting.py``); None for any other network."""
        return None


def set_autocast(module: nn.Module, dtype: torch.dtype | None) -> None:
    """Every `Network` within ``module`` computes its matrix products and convolutions in ``dtype`` under
    torch.autocast (None: float32)."""
    for network in module.modules():
        if isinstance(network, (Network, Layer)):  # a layer reuses its casts between passes (weight_and_bias)
            network.autocast_dtype = dtype


def cpu_bfloat16_native() -> bool | None:
    """Whether this CPU has bfloat16 instructions (x86: AVX512-BF16 or AMX tiles). Without them torch computes
    bfloat16 matrix products and convolutions in software, several times slower than float32. None where torch
    cannot tell (CPUs other than x86)."""
    checks = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    if platform.machine().lower() not in ("x86_64", "amd64") or not all(checks):
        return None
    return any(check() for check in checks if check is not None)


def _flat_layers(spec: Sequence[Any], path: str) -> Iterator[tuple[Any, str]]:
    """The layer specs of a (nested) list, in order, with their paths (``network[1][2]``)."""
    for index, item in enumerate(spec):
        if isinstance(item, (list, tuple)):
            yield from _flat_layers(item, f"{path}[{index}]")
        else:
            yield item, f"{path}[{index}]"


def _no_input_error(path: str, layer: str, states: Mapping[str, Value]) -> SpecError:
    return SpecError(
        path,
        f"layer '{layer}' has no input: {len(states)} states ({', '.join(states)}) reach this network, so layers "
        "must pick their input by name with 'input' layers",
        hint='Start each branch with {"type": "input", "names": "<state>"} and end it with {"type": "output", '
        '"name": "<branch>"}; then join the branches with {"type": "input", "names": ["<branch>", ...]}.',
    )


class LayeredNetwork(Network):
    """A network built from a 2018 layer list (docs/tensorforce-0.4.md, Networks); nested lists are flattened in
    order."""

    def __init__(self, layers: Sequence[Any], states: Mapping[str, StateSpec], *, path: str = "network") -> None:
        super().__init__()
        if not isinstance(layers, (list, tuple)):
            raise SpecError(
                path, "not a layer list", got=layers, expected='a list like [{"type": "dense", "size": 32}]'
            )
        self.layer_names: list[str] = []
        self._output_names: list[str] = []  # what output layers register, in order
        self._regularized: list[Layer] = []
        self._steps: list[tuple[int, Callable[..., Any], str]] = []  # (kind, step, name: "" for none)
        self._states = {name: Value(spec.shape, spec.type, spec) for name, spec in states.items()}
        named = dict(self._states)  # what input layers may name: states, then registered outputs
        current = next(iter(named.values())) if len(named) == 1 else None
        counters: Counter[str] = Counter()
        for spec, layer_path in _flat_layers(layers, path):
            current = self._add(spec, layer_path, current, named, counters)
        if current is None:
            raise _no_input_error(path, "(none)", self._states)
        if current.dtype != "float":
            self._steps.append((LAYER, _to_float, ""))
        if current.rank != 1:
            self._steps.append((LAYER, _flatten, ""))
        self.output_size = current.size
        self._state = next(iter(states)) if len(states) == 1 else None
        self._copy_named = any(kind in (OUTPUT, EMIT) for kind, _, _ in self._steps)
        plain = all(kind == LAYER for kind, _, _ in self._steps)
        # a plain chain (its state, its steps) calls each layer's forward directly (Module.__call__ costs as much as
        # a small layer's math)
        self._sequence: tuple[str, list[Callable[..., Any]]] | None = None
        if self._state is not None and plain:
            self._sequence = (self._state, [getattr(step, "forward", step) for _, step, _ in self._steps])

    def _add(self, spec: Any, path: str, current: Value | None, named: dict[str, Value], counters: Counter) -> Value:
        """Build one layer for the input ``current``, register it and its step; return what it outputs."""
        if not isinstance(spec, Mapping):
            raise SpecError(path, "not a layer", got=spec, expected='a dict like {"type": "dense", "size": 32}')
        kind, kwargs = LAYERS.split(spec, path)
        if inspect.isclass(kind):  # a class object, from Python code
            target, type_name = kind, "layer"
        else:
            target = LAYERS.get(kind, f"{path}.type")
            type_name = LAYERS.canonical(kind) or "layer"
        if inspect.isclass(target) and not issubclass(target, Layer):
            raise SpecError(f"{path}.type", f"{target.__qualname__} is not a layer", expected="a subclass of Layer")
        if current is None and getattr(target, "kind", None) != "input":
            raise _no_input_error(path, type_name, named)
        if current is not None and current.dtype != "float" and getattr(target, "needs_float", True):
            self._steps.append((LAYER, _to_float, ""))
            current = Value(current.shape)
        provided: dict[str, Any] = {"incoming": current, "path": path}
        if "named" in inspect.signature(target).parameters:
            provided["named"] = dict(named)
        check_kwargs(target, kwargs, path, provided=tuple(provided), what=f"layer '{type_name}'", got=dict(spec))
        check_provided(
            target, provided, f"{path}.type", f"layer '{type_name}'" if type_name != "layer" else repr(kind), "layer"
        )
        layer = target(**provided, **kwargs)
        if not isinstance(layer, Layer):
            raise SpecError(f"{path}.type", f"{kind!r} did not build a Layer", got=what_it_is(layer))
        for value in (layer.output, *layer.outputs.values()):
            expect_elements(value.size, path, f"the output per sample, of shape {list(value.shape)},", hint=SMALLER)
        name = f"{type_name}{counters[type_name]}"
        counters[type_name] += 1
        self.add_module(name, layer)
        self.layer_names.append(name)
        self._register(layer, name, path, named)
        return layer.output

    def _register(self, layer: Layer, name: str, path: str, named: dict[str, Value]) -> None:
        for output_name, value in layer.outputs.items():
            if output_name in named:
                owner = "a state" if output_name in self._states else "an earlier output"
                raise SpecError(path, f"the name '{output_name}' is already taken by {owner}")
            named[output_name] = value
            self._output_names.append(output_name)
        kind = STEP_KINDS[layer.kind]
        key = ""
        if kind == RECURRENT:
            self.internals[name] = tuple(layer.internal_shape)
            key = name
        elif kind == OUTPUT:
            key = layer.name
        self._steps.append((kind, layer, key))
        if layer.regularized:
            self._regularized.append(layer)

    def forward(
        self, states: dict[str, Tensor], internals: dict[str, Tensor] | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        sequence = self._sequence
        if sequence is not None:  # one state, a plain chain of layers
            state, steps = sequence
            x = states[state]
            for step in steps:
                x = step(x)
            return x, {}
        return self._run(states, {} if internals is None else internals)

    def dense_chain(self) -> tuple[str, list[Dense]] | None:
        if self._sequence is None:
            return None
        layers = [step for _, step, _ in self._steps]
        if not all(type(layer) is Dense and layer.skip is None for layer in layers):  # subclasses may compute more
            return None
        return self._sequence[0], layers  # type: ignore[return-value]

    def output_names(self) -> list[str]:
        """The names that the network's ``output`` layers (and layers such as ``dueling``) register."""
        return list(self._output_names)

    def named_outputs(self, states: dict[str, Tensor], internals: dict[str, Tensor] | None = None) -> dict[str, Tensor]:
        """The tensors registered under ``output_names()`` for these states (for ``act(..., fetch_tensors=...)``)."""
        named = dict(states)
        self._run(states, {} if internals is None else internals, named)
        return {name: named[name] for name in self._output_names}

    def _run(
        self, states: dict[str, Tensor], internals: dict[str, Tensor], named: dict[str, Tensor] | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        x = None if self._state is None else states[self._state]
        if named is None:
            named = dict(states) if self._copy_named else states
        next_internals = {}
        for kind, step, key in self._steps:
            if kind == LAYER:
                x = step(x)
            elif kind == INPUT:
                x = step(named, x)
            elif kind == OUTPUT:
                assert x is not None  # the builder gives every layer but an input layer an input
                named[key] = x
            elif kind == EMIT:
                x, parts = step(x)
                named.update(parts)
            else:
                assert x is not None
                state = internals.get(key)
                if state is None:  # no state given: start from zeros
                    state = x.new_zeros((x.shape[0], *self.internals[key]))
                x, next_internals[key] = step(x, state)
        assert x is not None  # a network without a state of its own ends with a layer
        return x, next_internals

    @property
    def has_penalties(self) -> bool:
        return bool(self._regularized) or type(self).regularization_loss is not LayeredNetwork.regularization_loss

    def regularization_loss(self) -> Tensor:
        if not self._regularized:
            return super().regularization_loss()
        losses = [loss for layer in self._regularized if (loss := layer.regularization_loss()) is not None]
        return torch.stack(losses).sum()


class ModuleNetwork(Network):
    """A user's ``torch.nn.Module`` as a `Network`. The module has ``output_size`` (int) and optionally
    ``internals`` ({name: per-sample shape}); ``forward(states)`` (``forward(states, internals)`` when it has
    internals) returns a tensor [B, ...] or a pair (tensor, next internals). Outputs are flattened to [B, size]."""

    def __init__(self, module: nn.Module, *, path: str = "network") -> None:
        super().__init__()
        name = type(module).__qualname__
        self.output_size = _checked_output_size(module, name, path)
        internals = getattr(module, "internals", None) or {}
        if not isinstance(internals, Mapping):
            raise SpecError(path, f"the network {name} has internals that are not a dict", got=internals)
        self.internals = {key: tuple(shape) for key, shape in internals.items()}
        self.module = module

    def forward(
        self, states: dict[str, Tensor], internals: dict[str, Tensor] | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        if self.internals:
            if internals is None:
                internals = self.initial_internals(next(iter(states.values())).shape[0])
            result = self.module(states, internals)
        else:
            result = self.module(states)
        output, next_internals = result if isinstance(result, tuple) else (result, {})
        if output.dim() != 2:
            output = output.reshape(output.shape[0], -1)
        return output, next_internals

    @property
    def has_penalties(self) -> bool:
        return callable(getattr(self.module, "regularization_loss", None))

    def regularization_loss(self) -> Tensor:
        loss = getattr(self.module, "regularization_loss", None)
        return loss() if callable(loss) else super().regularization_loss()


def has_penalties(module: object) -> bool:
    """Whether ``module`` (a network, policy, baseline or critic) has weight penalties: its ``has_penalties``,
    and True for a module without one (a user's baseline with a ``regularization_loss`` of its own)."""
    return bool(getattr(module, "has_penalties", True))


def penalized(loss: Tensor, module: Any) -> Tensor:
    """``loss + module.regularization_loss()``, or ``loss`` as it is where ``module`` has no penalties: adding their
    zero changes no number, and costs an operation forward and one backward on every step."""
    return loss + module.regularization_loss() if has_penalties(module) else loss


def _checked_output_size(module: nn.Module, name: str, path: str) -> int:
    size = getattr(module, "output_size", None)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise SpecError(
            path,
            f"the network {name} does not say its output_size",
            expected="an int attribute output_size >= 1",
            got=size,
        )
    return size


def shipped_networks() -> list[str]:
    """Names of the example networks in torchforce/configs/networks."""
    return sorted(file.stem for file in NETWORK_CONFIGS.glob("*.json"))


def _user_network(
    target: Any, kwargs: dict[str, Any], states: dict[str, StateSpec], path: str, type_path: str | None = None
) -> Network:
    """A network from a user's nn.Module class, constructed as ``Class(states=states, **kwargs)``. ``type_path`` is
    where the class was named: ``network.type`` in a dict spec, ``network`` itself for a string or a class."""
    type_path = type_path or path
    if not (inspect.isclass(target) and issubclass(target, nn.Module)):
        raise SpecError(type_path, "not a network class", got=what_it_is(target), expected="a torch.nn.Module subclass")
    what = f"network '{target.__qualname__}'"
    check_kwargs(target, kwargs, path, provided=("states",), what=what)
    if "states" not in inspect.signature(target).parameters:
        raise SpecError(type_path, f"{what} cannot be built: its constructor takes no 'states'")
    module = target(states=dict(states), **kwargs)
    if isinstance(module, Network):
        _checked_output_size(module, target.__qualname__, path)
        return module
    return ModuleNetwork(module, path=path)


def _from_name(name: str, states: dict[str, StateSpec], path: str) -> Network:
    if name in shipped_networks():
        file = NETWORK_CONFIGS / f"{name}.json"
        return build_network(file, states, path=path)
    if ":" in name or "." in name:
        return _user_network(import_path(name, path, base=nn.Module, kind="network"), {}, states, path)
    error = unknown_name_error(path, "network", name, shipped_networks())
    error.hint = (error.hint or "") + " Or give a layer list, a .json/.yaml file, or 'package.module:Class'."
    error.args = (error.render(),)
    raise error


def _from_dict(spec: Mapping[str, Any], states: dict[str, StateSpec], path: str) -> Network:
    kwargs = dict(spec)
    kind = kwargs.pop("type", None)
    if kind is None:
        raise SpecError(
            path,
            "a network dict needs 'type'",
            got=dict(spec),
            hint='A network is a list of layers, or {"type": "package.module:Class", ...} for a network class.',
        )
    if isinstance(kind, str) and LAYERS.canonical(kind) is not None:  # a single layer
        return LayeredNetwork([spec], states, path=path)
    if isinstance(kind, str) and ":" not in kind and "." not in kind:
        raise unknown_name_error(f"{path}.type", "layer or network class", kind, LAYERS.names())
    target = kind if inspect.isclass(kind) else import_path(kind, f"{path}.type", base=nn.Module, kind="network")
    return _user_network(target, kwargs, states, path, f"{path}.type")


def _normalized_states(states: Any, path: str) -> dict[str, StateSpec]:
    if isinstance(states, Mapping) and states and all(isinstance(s, StateSpec) for s in states.values()):
        return dict(states)
    return normalize_states(states, path=f"{path}.states")[0]


def build_network(spec: Any, states: Mapping[str, StateSpec], *, path: str = "network") -> Network:
    """A `Network` for ``states`` from ``spec``: a layer list (nested lists flattened), a .json/.yaml file of one,
    the name of a shipped example (``"mlp2_network"``), a `Network` or nn.Module instance, or a user class as
    ``"package.module:Class"`` / ``{"type": "package.module:Class", **kwargs}``."""
    states = _normalized_states(states, path)
    if isinstance(spec, Network):
        return spec
    if isinstance(spec, nn.Module):
        return ModuleNetwork(spec, path=path)
    try:
        data, file = load_spec(spec)
    except SpecError as error:
        raise error.under(path) from None
    try:
        if isinstance(data, (list, tuple)):
            return LayeredNetwork(data, states, path=path)
        if isinstance(data, str):
            return _from_name(data, states, path)
        if inspect.isclass(data):
            return _user_network(data, {}, states, path)
        if isinstance(data, Mapping):
            return _from_dict(data, states, path)
        raise SpecError(path, "not a network spec", got=data, expected="a list of layers, a file, or a class path")
    except SpecError as error:
        raise (error.with_file(file) if file else error) from None
