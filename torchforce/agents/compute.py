"""Where and how an agent's networks compute: the torch device of its ``device`` spec, the precision its
``mixed_precision`` resolves to on that device, and whether its losses can be compiled here (``compile``)."""

from __future__ import annotations

import torch

from torchforce.spec import SpecError, warn_spec
from torchforce.spec.device import AUTO_DEVICE


def resolve_device(device: str | None) -> torch.device:
    """The torch device of ``device``: None is the CPU, ``"auto"`` a GPU where this process sees one (CUDA), else
    the CPU, as SB3's ``device="auto"``; an experiment meant for a cluster's GPUs says ``"auto"`` so that it also
    builds, and runs, on a machine without one."""
    if device is None:
        return torch.device("cpu")
    if device == AUTO_DEVICE:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        raise SpecError(
            "device", "not a torch device", got=device, expected='"cpu", "cuda", "cuda:N" or "auto"'
        ) from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise SpecError(
            "device",
            "CUDA is not available on this machine",
            got=device,
            hint='Use "cpu", or "auto" (a GPU where there is one, else the CPU).',
        )
    return resolved


def resolve_precision(precision: str | None, device: torch.device) -> str | None:
    """What networks on ``device`` compute their matrix products and convolutions in, under torch.autocast:
    "bfloat16", or None for float32. ``precision`` "auto" is bfloat16 where ``device`` computes it natively (a CUDA
    GPU that supports it, an x86 CPU with AVX512-BF16 or AMX), float32 on any other device or CPU, and on a CPU torch
    cannot tell about. "bfloat16" is refused on a GPU without bfloat16 arithmetic, and warned of on a CPU that
    would emulate it."""
    from torchforce.core.networks import cpu_bfloat16_native

    if precision == "auto":
        if device.type == "cuda":  # a GPU before Ampere emulates bfloat16: float32 there
            native = torch.cuda.is_bf16_supported(including_emulation=False)
        else:
            native = device.type == "cpu" and cpu_bfloat16_native() is True
        precision = "bfloat16" if native else None
    if precision == "bfloat16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise SpecError(
            "mixed_precision",
            f"this GPU ({torch.cuda.get_device_name(device)}) has no bfloat16 arithmetic",
            got=precision,
            hint="Use null (float32).",
        )
    if precision == "bfloat16" and device.type == "cpu" and cpu_bfloat16_native() is False:
        # it still computes, so a checkpoint moved to such a machine restores; but it should not go unnoticed
        warn_spec(
            'mixed_precision "bfloat16": this CPU has no bfloat16 instructions (AVX512-BF16 or AMX), so torch '
            "computes the networks in bfloat16 in software, several times slower than float32 (a Breakout DQN "
            "update: 6.3x on an AVX2 CPU). Use null (float32) here, or a CPU or GPU with bfloat16 arithmetic."
        )
    return precision


def can_compile(device: torch.device) -> bool:
    """Whether TorchInductor can compile losses on ``device`` here; where it cannot (a CPU without a C++ compiler),
    a warning says so and the losses stay uncompiled."""
    if device.type == "cpu" and not cpp_compiler_found():
        # a checkpoint moved to such a machine still restores and trains, uncompiled; but not unnoticed
        warn_spec(
            "compile: TorchInductor needs a C++ compiler on a CPU (g++, or the one $CXX names) and finds none, "
            "so the losses stay uncompiled. Install one (apt install g++), or set compile to false."
        )
        return False
    return True


def cpp_compiler_found() -> bool:
    """Whether TorchInductor finds the C++ compiler it builds CPU kernels with (True where torch cannot tell)."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler
    except ImportError:  # another torch release: let compiling say what it lacks
        return True
    try:
        get_cpp_compiler()
    except (RuntimeError, OSError):
        return False
    return True
