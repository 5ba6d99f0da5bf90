"""Registries: one explicit name table per component kind, imported lazily, with did-you-mean on typos.

A spec for a component may be a ready instance, a bare name (``"adam"``), a dict with a ``type`` key
(``{"type": "adam", "learning_rate": 1e-3}``), or a user class by path (``"package.module:Class"`` or the 2018
dotted form ``"package.module.Class"``).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from torchforce.spec.errors import SpecError, did_you_mean, unknown_name_error


def import_path(target: str, path: str = "type") -> Any:
    """Import ``"module:Name"`` or ``"module.Name"``; a failure is a SpecError naming ``path``."""
    if ":" in target:
        module_name, _, attribute = target.partition(":")
    else:
        module_name, _, attribute = target.rpartition(".")
    if not module_name or not attribute:
        raise SpecError(path, "not an importable path", got=target, expected="'package.module:Class'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise SpecError(path, f"cannot import module '{module_name}': {error}", got=target) from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise SpecError(path, f"module '{module_name}' has no attribute '{attribute}'", got=target) from None


def check_kwargs(target: Callable[..., Any], kwargs: Mapping[str, Any], path: str, *, provided: tuple[str, ...] = ()) -> None:
    """Unknown keys and missing required keys of ``target``'s signature are SpecErrors.

    ``provided`` names arguments the caller supplies itself (they are neither required of nor allowed in the spec).
    """
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return
    parameters = signature.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    accepted = [
        name
        for name, p in parameters.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY) and name not in provided
    ]
    for key in kwargs:
        if key not in accepted:
            guess = did_you_mean(key, accepted)
            hint = f"Did you mean '{guess}'?" if guess else "Accepted: " + (", ".join(accepted) or "no arguments") + "."
            raise SpecError(f"{path}.{key}" if path else key, "unknown argument", hint=hint)
    for name, p in parameters.items():
        if name in provided or name in kwargs or p.default is not inspect.Parameter.empty:
            continue
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            raise SpecError(path, f"needs '{name}'", got=dict(kwargs))


class Registry:
    """The name table of one component kind (``memory``, ``optimizer``, ...).

    ``table`` maps names to ``"module:Class"`` strings, so nothing is imported until a name is used and every
    name is greppable. ``aliases`` maps accepted alternative names (2018 long names) to table names.
    """

    def __init__(self, kind: str, table: Mapping[str, str], aliases: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self.table = dict(table)
        self.aliases = dict(aliases or {})

    def names(self) -> list[str]:
        return sorted(self.table)

    def canonical(self, name: str) -> str | None:
        """The table name for ``name`` or one of its aliases; None for unknown names."""
        if name in self.table:
            return name
        return self.aliases.get(name)

    def get(self, name: str, path: str = "type") -> Any:
        """The class (or factory) registered as ``name``, or a user class by import path."""
        if not isinstance(name, str):
            raise SpecError(path, f"a {self.kind} type must be a name", got=name, expected="a string")
        canonical = self.canonical(name)
        if canonical is not None:
            return import_path(self.table[canonical], path)
        if ":" in name or "." in name:
            return import_path(name, path)
        raise unknown_name_error(path, self.kind, name, self.table)

    def split(self, spec: Any, path: str, default: str | None = None) -> tuple[str, dict[str, Any]]:
        """Split a spec into its type name and keyword arguments."""
        if isinstance(spec, str):
            return spec, {}
        if isinstance(spec, Mapping):
            kwargs = dict(spec)
            name = kwargs.pop("type", default)
            if name is None:
                raise SpecError(path, f"a {self.kind} spec needs 'type'", got=dict(spec), hint="Known: " + ", ".join(self.names()) + ".")
            return name, kwargs
        raise SpecError(path, f"not a {self.kind} spec", got=spec, expected="a name or a dict with 'type'")

    def create(self, spec: Any, path: str, *, base: type | None = None, default: str | None = None, **provided: Any) -> Any:
        """Build a component from its spec; ``provided`` are the arguments the caller supplies (states, ...)."""
        if base is not None and isinstance(spec, base):
            return spec
        if spec is None and default is not None:
            spec = default
        if inspect.isclass(spec) and (base is None or issubclass(spec, base)):
            target, kwargs = spec, {}
        else:
            name, kwargs = self.split(spec, path, default)
            target = self.get(name, f"{path}.type" if isinstance(spec, Mapping) else path)
        check_kwargs(target, kwargs, path, provided=tuple(provided))
        try:
            return target(**provided, **kwargs)
        except SpecError as error:
            if not error.path.startswith(path):
                error.under(path)
            raise
