"""The ``input`` and ``output`` layers, which let one layer list read several states
(docs/tensorforce-0.4.md, Networks).

``output`` registers the current tensor under a name; ``input`` makes the current tensor a named state, a
registered output, ``'*'``/``'previous'`` (the current tensor), or several of them joined by ``aggregation_type``:
``concat`` along ``axis``, ``stack`` on a new ``axis``, or elementwise ``sum``/``product``. ``axis`` counts the batch
dimension as 0, as in 2018. Joined int/bool inputs are cast to float.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import Tensor

from torchforce.core.networks.base import Layer, Value
from torchforce.spec import SpecError, expect_choice, expect_int
from torchforce.spec.errors import describe, did_you_mean

PREVIOUS = ("*", "previous")
AGGREGATIONS = ("concat", "stack", "sum", "product")


def _names(names: Any, path: str) -> list[str]:
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) and n for n in names):
        raise SpecError(path, "not a name or a list of names", got=names, expected='"state" or ["a", "b"]')
    return list(names)


def _batch_axis(axis: int, rank: int, path: str) -> int:
    """``axis`` (batch = 0, negative from the end) of a tensor of ``rank`` dims incl. batch, as a positive dim."""
    if not -rank <= axis < rank or axis % rank == 0:
        raise SpecError(path, "out of range", got=axis, expected=f"an axis in 1..{rank - 1} (0 is the batch axis)")
    return axis % rank


def _joined_shape(shapes: list[tuple[int, ...]], aggregation: str, axis: int, path: str) -> tuple[tuple[int, ...], int]:
    """The per-sample shape of the joined tensor, and the batch-inclusive dim the join uses."""
    first = shapes[0]
    if aggregation == "concat":
        dim = _batch_axis(axis, len(first) + 1, f"{path}.axis")
        rest = [shape[: dim - 1] + shape[dim:] for shape in shapes]
        if any(len(shape) != len(first) for shape in shapes) or any(r != rest[0] for r in rest):
            raise SpecError(path, f"cannot concatenate shapes {shapes} along axis {axis}")
        return (*first[: dim - 1], sum(shape[dim - 1] for shape in shapes), *first[dim:]), dim
    if any(shape != first for shape in shapes):
        raise SpecError(path, f"cannot {aggregation} inputs of different shapes {shapes}; they must be equal")
    if aggregation == "stack":
        dim = _batch_axis(axis, len(first) + 2, f"{path}.axis")
        return (*first[: dim - 1], len(shapes), *first[dim - 1 :]), dim
    return first, 0


class Input(Layer):
    """Select (or join) named tensors as the current tensor."""

    kind = "input"
    needs_float = False

    def __init__(
        self,
        *,
        incoming: Value | None,
        path: str,
        named: dict[str, Value],
        names: Any,
        aggregation_type: str = "concat",
        axis: int = 1,
    ) -> None:
        super().__init__(incoming=incoming or Value(()), path=path)
        self.sources: list[str | None] = []  # None: the current tensor
        values = []
        for name in _names(names, f"{path}.names"):
            if name in PREVIOUS:
                if incoming is None:
                    raise SpecError(
                        f"{path}.names",
                        f"'{name}' means the current tensor, and there is none yet",
                        hint="Name a state instead: " + ", ".join(sorted(named)) + ".",
                    )
                self.sources.append(None)
                values.append(incoming)
            elif name in named:
                self.sources.append(name)
                values.append(named[name])
            else:
                guess = did_you_mean(name, named)
                raise SpecError(
                    f"{path}.names",
                    f"unknown input {describe(name)}",
                    hint="Known here (states and names of earlier output layers): "
                    + ", ".join(sorted(named))
                    + "."
                    + (f" Did you mean '{guess}'?" if guess else ""),
                )
        self.aggregation = expect_choice(aggregation_type, f"{path}.aggregation_type", AGGREGATIONS)
        axis = expect_int(axis, f"{path}.axis")
        if len(values) == 1:
            self.output = values[0]  # a single input passes through unchanged (an int state stays int)
            self.dim = 0
            self.cast: list[bool] = []
        else:
            shape, self.dim = _joined_shape([value.shape for value in values], self.aggregation, axis, path)
            self.cast = [value.dtype != "float" for value in values]
            self.output = Value(shape)

    def forward(self, named: dict[str, Tensor], x: Tensor | None) -> Tensor:
        if not self.cast:
            return _source(named, x, self.sources[0])
        tensors = [_source(named, x, source) for source in self.sources]
        tensors = [tensor.float() if cast else tensor for tensor, cast in zip(tensors, self.cast, strict=True)]
        if self.aggregation == "concat":
            return torch.cat(tensors, dim=self.dim)
        if self.aggregation == "stack":
            return torch.stack(tensors, dim=self.dim)
        return functools.reduce(torch.add if self.aggregation == "sum" else torch.mul, tensors)


def _source(named: dict[str, Tensor], x: Tensor | None, source: str | None) -> Tensor:
    """The tensor named ``source``, or for None the current tensor ``x`` (which ``Input`` made sure there is)."""
    if source is not None:
        return named[source]
    assert x is not None
    return x


class Output(Layer):
    """Register the current tensor under ``name`` for later ``input`` layers; the tensor flows on unchanged."""

    kind = "output"
    needs_float = False

    def __init__(self, *, incoming: Value, path: str, name: str) -> None:
        super().__init__(incoming=incoming, path=path)
        if not isinstance(name, str) or not name:
            raise SpecError(f"{path}.name", "not a name", got=name, expected="a non-empty string")
        self.name = name
        self.output = incoming
        self.outputs = {name: incoming}

    def forward(self, x: Tensor) -> Tensor:
        return x
