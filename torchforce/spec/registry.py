"""Registries: one explicit name table per component kind, imported lazily, with did-you-mean on typos.

A spec for a component may be a ready instance, a class, a bare name (``"adam"``), a dict with a ``type`` key
(``{"type": "adam", "learning_rate": 1e-3}``), or a user class by path (``"package.module:Class"`` or the 2018
dotted form ``"package.module.Class"``).

Security. A config is data, but a user class named by path is code: its module is imported and the class is built
with the spec's arguments, by design. So that a config can run nothing else:

- A path must name a class of the registry's kind, a subclass of its base class (``Environment``, ``Agent``,
  ``Memory``, ``Optimizer``, ``Layer``, ...: ``Registry(base=...)``, or ``create(base=...)``). Anything else (a
  function such as ``os:system``, a class such as ``types:SimpleNamespace``) is a SpecError naming the spec path,
  raised before anything is called. A registry without a base class takes no paths at all.
- Importing a module runs its code, so a module is checked before it is imported (``check_module``): modules that
  come with Python are refused (none holds a component, and some run a program when imported: ``antigravity``,
  ``idlelib.idle``, the test suite's ``test.autotest``; see ``in_standard_library``), so are ``__main__`` modules
  (a package's command line). A module of an installed package is imported only when that package is, or declares
  that it depends on, the package of the base class (torchforce, or torch for a ``torch.nn.Module``), as any
  package defining such a class must. Any other importable module is the user's own and is imported: user classes
  must be importable (a project's own modules load only from its configured module folder; in a script of one's own,
  from ``sys.path``), and they run with the user's rights.

Names in a table are torchforce's own and are imported as they are (some name factory functions).
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import os
import re
import sys
import sysconfig
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from torchforce.spec.errors import (
    SpecError,
    describe,
    did_you_mean,
    indefinite,
    type_name,
    unknown_name_error,
    what_it_is,
)

KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
KWARGS = object()  # check_kwargs's default ``got``: show the kwargs
REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _split_target(target: Any, path: str) -> list[tuple[str, str]]:
    """The (module, attribute) pairs to try for ``target``, most specific module first."""
    if not isinstance(target, str):
        raise SpecError(path, "not an importable path", got=target, expected="'package.module:Class'")
    if ":" in target:
        module_name, _, attribute = target.partition(":")
        pairs = [(module_name, attribute)]
    else:  # 2018 form "package.module.Class": the module is the longest prefix that imports
        parts = target.split(".")
        pairs = [(".".join(parts[:i]), ".".join(parts[i:])) for i in range(len(parts) - 1, 0, -1)]
    names = [name for module_name, attribute in pairs[:1] for name in (*module_name.split("."), *attribute.split("."))]
    if not pairs or not all(name.isidentifier() for name in names):
        raise SpecError(path, "not an importable path", got=target, expected="'package.module:Class'")
    return pairs


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.lru_cache(maxsize=4)
def _packages_by_module(search_path: tuple[str, ...]) -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


def installed_packages(module_name: str) -> list[str]:
    """The installed distributions that provide the top-level module of ``module_name`` (none for the standard
    library and for modules that are only on ``sys.path``), found without importing anything."""
    top = module_name.partition(".")[0]
    return sorted(set(_packages_by_module(tuple(sys.path)).get(top, ())))


@functools.lru_cache(maxsize=256)
def _depends_on(distribution: str, package: str, search_path: tuple[str, ...]) -> bool:
    if _normalized(distribution) == _normalized(package):
        return True
    try:
        requires = importlib.metadata.distribution(distribution).requires or []
    except importlib.metadata.PackageNotFoundError:
        return False
    names = {_normalized(match.group(1)) for match in map(REQUIREMENT_NAME.match, requires) if match}
    return _normalized(package) in names  # extras included: ale-py needs gymnasium only for its "vector" extra


@functools.lru_cache(maxsize=256)
def in_standard_library(top: str) -> bool:
    """Whether the top-level module ``top`` comes with Python: named in ``sys.stdlib_module_names``, built in or
    frozen, or found in the interpreter's own library folders outside site-packages. (The names leave out the test
    suite, ``test``, whose ``test.autotest`` runs CPython's tests when imported, and helpers such as ``_testcapi``.)
    Found without importing anything."""
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return True
    try:
        spec = importlib.util.find_spec(top)  # a top-level name: located by the finders, never run
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    if spec.origin in ("built-in", "frozen"):
        return True
    places = [spec.origin] if spec.origin else list(spec.submodule_search_locations or ())
    library = {Path(sysconfig.get_paths()[key]).resolve() for key in ("stdlib", "platstdlib")}
    for place in places:
        where = Path(place).resolve()
        installed = {"site-packages", "dist-packages"} & set(where.parts)
        if not installed and any(where.is_relative_to(folder) for folder in library):
            return True
    return False


def check_module(module_name: str, target: str, path: str, *, package: str | None = None, holds: str) -> None:
    """Refuse, before it is imported, a module that a spec may not make torchforce import (see the module doc).

    ``package`` is the distribution an installed module's package must be or depend on (None: any installed
    package); ``holds`` says what the spec wants from the module (``"environment"``), for the message.
    """
    if "__main__" in module_name.split("."):
        raise SpecError(
            path,
            f"module '{module_name}' is a program's entry point (importing it runs the program) and holds no {holds}",
            got=target,
        )
    top = module_name.partition(".")[0]
    if in_standard_library(top):
        raise SpecError(
            path,
            f"module '{module_name}' belongs to Python's standard library, which holds no {holds}",
            got=target,
            hint=f"Name a module of your own, or one of an installed package built on {package or 'torchforce'}.",
        )
    if package is None:
        return
    installed = installed_packages(module_name)
    search_path = tuple(sys.path)
    if installed and not any(_depends_on(name, package, search_path) for name in installed):
        raise SpecError(
            path,
            f"module '{module_name}' belongs to the installed package '{installed[0]}', which does not depend on "
            f"{package} and so holds no {holds}",
            got=target,
            hint=f"Importing a module runs its code, so a config may name only modules of packages built on {package}"
            ", and your own modules.",
        )


def _package_of(base: type) -> str | None:
    """The distribution that defines ``base`` (None when it is not installed, e.g. run from a source folder)."""
    installed = installed_packages(base.__module__)
    return installed[0] if installed else None


def import_path(target: str, path: str = "type", *, base: type | None = None, kind: str | None = None) -> Any:
    """Import ``"module:Name"`` (``Name`` may be dotted: ``Outer.Inner``) or the 2018 form ``"module.Name"``.

    A failure is a SpecError naming ``path``: a malformed path, a module that may not be imported (see the module
    doc), a module that does not exist, a module that fails to import (say, a missing dependency), or a missing
    attribute (with a did-you-mean). With ``base``, the module must also be able to hold a subclass of ``base`` and
    the attribute must be one (a ``kind``, for the messages); it is checked before anything is called.
    """
    pairs = _split_target(target, path)
    kind = kind or "torchforce component"
    package = _package_of(base) if base is not None else None
    for module_name, _ in pairs:
        check_module(module_name, target, path, package=package, holds=kind)
    value = _import(pairs, target, path)
    if base is not None and not (inspect.isclass(value) and issubclass(value, base)):
        raise SpecError(
            path,
            f"'{target}' is not {indefinite(kind)} class",
            got=what_it_is(value),
            expected=f"a subclass of {type_name(base)}",
        )
    return value


def _import(pairs: list[tuple[str, str]], target: str, path: str) -> Any:
    missing = None
    for module_name, attribute in pairs:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            name = error.name or module_name
            if module_name != name and not module_name.startswith(name + "."):
                raise SpecError(path, f"importing module '{module_name}' failed: {error}", got=target) from None
            missing = missing or name  # this module does not exist: try a shorter one (2018 dotted form)
            continue
        except ImportError as error:
            raise SpecError(path, f"importing module '{module_name}' failed: {error}", got=target) from None
        return _attribute(module, module_name, attribute, target, path)
    raise SpecError(
        path,
        f"cannot import module '{pairs[0][0]}': no module named '{missing}'",
        got=target,
        hint=missing_module_hint(missing or pairs[0][0]),
    )


def missing_module_hint(name: str) -> str:
    """What to do about the module ``name`` that cannot be imported. tfcli and its workers never read PYTHONPATH
    (the workers run ``python -I``; see ``torchforce.client.modules``): where a PYTHONPATH folder this process does
    not read holds the module, the hint says so and where it belongs; else the usual checks."""
    top = name.partition(".")[0]
    read = {os.path.abspath(folder) for folder in sys.path if folder}
    unread = [
        folder
        for folder in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if folder and os.path.abspath(folder) not in read
    ]
    found = importlib.machinery.PathFinder.find_spec(top, unread) if unread and top.isidentifier() else None
    if found is not None:
        where = next((folder for folder in unread if (found.origin or "").startswith(os.path.abspath(folder))), "")
        return (
            f"'{top}' is in {where or 'a folder of PYTHONPATH'}, on PYTHONPATH, which tfcli and its workers do not "
            "read (they import as 'python -I' does): put it in the project's modules/ folder, or install its package."
        )
    return (
        "Check the spelling, and that the package is installed (with tfcli, a project's own module goes in its "
        "modules/ folder)."
    )


def _attribute(module: Any, module_name: str, attribute: str, target: str, path: str) -> Any:
    value, owner = module, f"module '{module_name}'"
    for name in attribute.split("."):
        if not hasattr(value, name):
            guess = did_you_mean(name, [n for n in dir(value) if not n.startswith("_")])
            raise SpecError(
                path,
                f"{owner} has no attribute '{name}'",
                got=target,
                hint=f"Did you mean '{guess}'?" if guess else None,
            )
        value = getattr(value, name)
        owner = f"'{getattr(value, '__qualname__', name)}'"
    return value


def check_kwargs(
    target: Callable[..., Any],
    kwargs: Mapping[str, Any],
    path: str,
    *,
    provided: tuple[str, ...] = (),
    what: str | None = None,
    got: Any = KWARGS,
) -> None:
    """Unknown keys and missing required keys of ``target``'s signature are SpecErrors.

    ``provided`` names arguments the caller supplies itself (they are neither required of nor allowed in the spec).
    When ``target`` takes ``**kwargs`` any other key may be meant for it, so only the required arguments (and the
    provided ones) are checked. ``what`` names the component in the messages (``unknown argument for layer
    'dense'``; ``network[2]: layer 'dense' needs 'size'; got {...}``), ``got`` is the spec shown
    when a required argument is missing (by default the kwargs; ``...`` shows nothing).
    """
    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return
    open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    accepted = [name for name, p in parameters.items() if p.kind in KEYWORD and name not in provided]
    for key in kwargs:
        if key in provided:
            raise SpecError(
                f"{path}.{key}" if path else key,
                "set by torchforce, not by the spec",
                hint=f"Remove '{key}' from the spec; torchforce passes it itself.",
            )
        if not open_ended and key not in accepted:
            guess = did_you_mean(key, accepted)
            hint = f"Did you mean '{guess}'?" if guess else "Accepted: " + (", ".join(accepted) or "no arguments") + "."
            message = f"unknown argument for {what}" if what else "unknown argument"
            raise SpecError(f"{path}.{key}" if path else key, message, hint=hint)
    for name, p in parameters.items():
        if name in provided or name in kwargs or p.default is not inspect.Parameter.empty or p.kind not in KEYWORD:
            continue
        raise SpecError(
            path, f"{what} needs '{name}'" if what else f"needs '{name}'", got=dict(kwargs) if got is KWARGS else got
        )


def _is_under(path: str, root: str) -> bool:
    """Whether ``path`` already starts with ``root`` (``root``, ``root.x`` or ``root[2]``)."""
    return not root or path == root or path.startswith((root + ".", root + "["))


class Registry:
    """The name table of one component kind (``memory``, ``optimizer``, ...).

    ``table`` maps names to ``"module:Class"`` strings, so nothing is imported until a name is used and every
    name is greppable. ``aliases`` maps accepted alternative names (2018 long names) to table names. ``base`` is the
    class every user class named by path must subclass (a class, or its ``"module:Class"``, imported when first
    needed); without one, only the table's names are accepted (see the module doc).
    """

    def __init__(
        self,
        kind: str,
        table: Mapping[str, str],
        aliases: Mapping[str, str] | None = None,
        *,
        base: type | str | None = None,
    ) -> None:
        self.kind = kind
        self.table = dict(table)
        self.aliases = dict(aliases or {})
        self._base = base

    @property
    def base(self) -> type | None:
        """The base class of user classes named by path (None: no paths accepted)."""
        base = self._base
        if isinstance(base, str):
            base = self._base = import_path(base, f"the {self.kind} registry's base")
        return base

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self.table)} names)"

    def names(self) -> list[str]:
        """The table's names, sorted (aliases not included)."""
        return sorted(self.table)

    def canonical(self, name: str) -> str | None:
        """The table name for ``name`` or one of its aliases; None for unknown names."""
        if not isinstance(name, str):
            return None
        if name in self.table:
            return name
        alias = self.aliases.get(name)
        return alias if alias in self.table else None

    def get(self, name: str, path: str = "type", *, base: type | None = None) -> Any:
        """The class (or factory) registered as ``name``, or a user class by import path: a subclass of ``base``
        (by default the registry's), checked before it is returned (see the module doc)."""
        if not isinstance(name, str):
            raise SpecError(path, f"a {self.kind} type must be a name", got=name, expected="a string")
        canonical = self.canonical(name)
        if canonical is not None:
            return import_path(self.table[canonical], path)
        if ":" in name or "." in name:
            base = base if base is not None else self.base
            if base is None:
                raise SpecError(
                    path,
                    f"unknown {self.kind} {describe(name)}: a {self.kind} cannot be a class named by path",
                    hint="Known: " + ", ".join(self.names()) + ".",
                )
            return import_path(name, path, base=base, kind=self.kind)
        aliases = [alias for alias in self.aliases if self.canonical(alias) is not None]
        raise unknown_name_error(path, self.kind, name, self.table, aliases=aliases)

    def split(self, spec: Any, path: str, default: str | None = None) -> tuple[Any, dict[str, Any]]:
        """Split a spec into its type (a name, or a class) and keyword arguments.

        A dict without ``type`` (or with ``"type": null``) takes ``default``; without a default it is an error.
        """
        if isinstance(spec, str):
            return spec, {}
        if isinstance(spec, Mapping):
            kwargs = dict(spec)
            name = kwargs.pop("type", None)
            if name is None:
                name = default
            if name is None:
                raise SpecError(
                    path,
                    f"a {self.kind} spec needs 'type'",
                    got=dict(spec),
                    hint="Known: " + ", ".join(self.names()) + ".",
                )
            return name, kwargs
        raise SpecError(path, f"not a {self.kind} spec", got=spec, expected="a name or a dict with 'type'")

    def create(
        self, spec: Any, path: str, *, base: type | None = None, default: str | None = None, **provided: Any
    ) -> Any:
        """Build a component from its spec; ``provided`` are the arguments the caller supplies (states, ...).

        A SpecError the constructor raises with a path relative to the component (``capacity``) is re-rooted under
        ``path`` (``agent.memory.capacity``); one whose path already starts with ``path`` is left as it is.
        """
        if base is not None and isinstance(spec, base):
            return spec
        if spec is None and default is not None:
            spec = default
        name, kwargs = (spec, {}) if inspect.isclass(spec) else self.split(spec, path, default)
        type_path = f"{path}.type" if isinstance(spec, Mapping) else path
        if inspect.isclass(name):  # a class given directly, or as {"type": SomeClass, ...} from Python code
            if base is not None and not issubclass(name, base):
                raise SpecError(
                    type_path,
                    f"class {name.__qualname__} is not a {self.kind}",
                    expected=f"a subclass of {base.__qualname__}",
                )
            target, name = name, name.__name__
        else:
            target = self.get(name, type_path, base=base)
        what = f"{self.kind} '{name}'"
        got = dict(spec) if isinstance(spec, Mapping) else ...
        check_kwargs(target, kwargs, path, provided=tuple(provided), what=what, got=got)
        check_provided(target, provided, type_path, what, self.kind)
        try:
            return target(**provided, **kwargs)
        except SpecError as error:
            if not _is_under(error.path, path):
                error.under(path)
            raise


def check_provided(target: Any, provided: Iterable[str], path: str, what: str, kind: str) -> None:
    """A (user) constructor that cannot take what torchforce passes to every component of its kind is a SpecError."""
    provided = tuple(provided)
    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    accepted = {name for name, p in parameters.items() if p.kind in KEYWORD}
    missing = [name for name in provided if name not in accepted]
    if missing:
        names = " and ".join(f"'{name}'" for name in provided)
        raise SpecError(
            path,
            f"{what} cannot be built here: its constructor takes no " + ", ".join(f"'{name}'" for name in missing),
            hint=f"torchforce passes {names} to every {kind}; "
            + ("accept it as a keyword argument." if len(provided) == 1 else "accept them as keyword arguments."),
        )
