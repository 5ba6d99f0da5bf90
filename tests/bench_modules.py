"""The benchmark scripts of bench/ loaded as modules for their tests (bench/ is no package: its scripts import each
other by name, as ``python bench/X.py`` runs them)."""

import importlib.util
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "bench"


def bench_module(name: str, registered: dict[str, ModuleType] | None = None) -> ModuleType:
    """``bench/<name>.py`` as the module ``bench_<name>``; ``registered`` (``sys.modules``, or a test's stand-in
    for it) gets it before it runs, for code that looks its own module up (dataclasses do)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    if registered is not None:
        registered[f"bench_{name}"] = module
    spec.loader.exec_module(module)
    return module
