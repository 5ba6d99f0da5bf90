"""A module container keyed by user names (state and action names), which may clash with ``nn.Module``
attributes such as ``float`` or ``train``: the keys are stored escaped and given back as the user wrote them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar, cast

from torch import nn

M = TypeVar("M", bound=nn.Module)


def _key(name: str) -> str:
    return "m_" + name.replace(".", "_")


class NamedModules(nn.Module, Generic[M]):
    """``{name: module}`` like ``nn.ModuleDict``, for any string name."""

    def __init__(self, modules: Mapping[str, M]) -> None:
        super().__init__()
        escaped: dict[str, str] = {}
        for name in modules:
            if _key(name) in escaped:  # '.' is not allowed in a module's name: "a.b" is kept as "a_b"
                raise ValueError(
                    f"the names '{escaped[_key(name)]}' and '{name}' would share one set of modules (a '.' in a name "
                    "is kept as '_'): rename one of them"
                )
            escaped[_key(name)] = name
        self.names: list[str] = list(modules)
        self.escaped = nn.ModuleDict({_key(name): module for name, module in modules.items()})

    def __getitem__(self, name: str) -> M:
        return cast(M, self.escaped[_key(name)])  # nn.ModuleDict holds only what __init__ put in it

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def keys(self) -> list[str]:
        return list(self.names)

    def values(self) -> list[M]:
        return [self[name] for name in self.names]

    def items(self) -> list[tuple[str, M]]:
        return [(name, self[name]) for name in self.names]
