"""kernels: instruction-set levels of x86 CPUs for the native kernels, and which one a process runs.

:data:`LEVELS` names each level the kernels are built for, with its compiler flags and the CPU flags it needs:
``scalar`` (plain C++), ``avx2`` (AVX2, FMA, F16C: integer dots by maddubs/madd), ``avx2-vnni`` (plus
AVX-VNNI's 256-bit vpdpbusd: Intel 12th generation and later, AMD Zen 5) and ``avx512`` (AVX-512 BW, VL and
VNNI). :func:`chosen_level` is the best level this CPU runs, or the one ``$LOOKAHEAD_LSP_NATIVE_ISA`` names
where the CPU runs it: so one AVX-512 machine measures and tests what an AVX2 laptop runs.
:func:`pin_libraries` does the same for PyTorch's own kernels (ATen, oneDNN, MKL) and the choice of bfloat16
prefill: a forced level below the CPU's leaves the whole process as such a CPU would run it. It must run
before torch is imported (``lookahead_lsp/__init__.py`` calls it), and never overrides a setting the user made.
No torch import here.
"""

from __future__ import annotations

import logging
import os
import platform
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

ISA_ENV = "LOOKAHEAD_LSP_NATIVE_ISA"


@dataclass(frozen=True)
class Level:
    """One instruction-set level: the compiler flags of its build and the CPU flags (``/proc/cpuinfo``) it needs."""

    flags: tuple[str, ...]
    needs: frozenset[str]
    libraries: dict[str, str]  # environment that pins PyTorch's libraries to this level (empty: no pinning)


_AVX2 = frozenset({"avx2", "fma", "f16c"})
LEVELS: dict[str, Level] = {
    "scalar": Level(
        ("-march=x86-64",),
        frozenset(),
        {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
    ),
    "avx2": Level(
        ("-march=haswell",),
        _AVX2,
        {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    ),
    "avx2-vnni": Level(
        ("-march=haswell", "-mavxvnni"),
        _AVX2 | {"avx_vnni"},
        {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2_VNNI", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    ),
    "avx512": Level(
        ("-march=haswell", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx512vnni"),
        _AVX2 | {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"},
        {},
    ),
}
"""The levels, lowest first."""


def cpu_flag_set() -> frozenset[str]:
    """This CPU's feature flags (Linux ``/proc/cpuinfo``; empty elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def runnable_levels(flags: frozenset[str] | None = None) -> list[str]:
    """The levels this CPU (or one with ``flags``) runs, lowest first; only ``scalar`` off x86-64."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return []
    have = cpu_flag_set() if flags is None else flags
    return [name for name, level in LEVELS.items() if level.needs <= have]


def requested_level() -> str | None:
    """The level ``$LOOKAHEAD_LSP_NATIVE_ISA`` names (None: unset, ``native`` or ``auto``); ValueError for a name
    that is no level."""
    name = os.environ.get(ISA_ENV, "").strip().lower()
    if name in ("", "native", "auto"):
        return None
    if name not in LEVELS:
        raise ValueError(f"{ISA_ENV}={name!r}: use one of {', '.join(LEVELS)} (or native)")
    return name


def chosen_level(flags: frozenset[str] | None = None) -> str:
    """The level this process builds its kernel for: the requested one where the CPU runs it, else the best
    it runs (a request it cannot run is logged and ignored)."""
    runnable = runnable_levels(flags) or ["scalar"]
    try:
        wanted = requested_level()
    except ValueError as exc:
        logger.warning("%s; using %s", exc, runnable[-1])
        return runnable[-1]
    if wanted is not None and wanted not in runnable:
        logger.warning("%s=%s: this CPU cannot run it; using %s", ISA_ENV, wanted, runnable[-1])
        return runnable[-1]
    return wanted or runnable[-1]


def bf16_allowed() -> bool:
    """False where a forced level below AVX-512 stands for a CPU without bfloat16 instructions."""
    try:
        wanted = requested_level()
    except ValueError:
        return True
    return wanted is None or wanted == "avx512"


def pin_libraries(environ: os._Environ[str] | dict[str, str] = os.environ) -> None:
    """Pin PyTorch's CPU libraries to the forced level (``$LOOKAHEAD_LSP_NATIVE_ISA``), where one is forced;
    a variable the user set stays as set."""
    try:
        wanted = requested_level()
    except ValueError:
        return
    if wanted is None:
        return
    for key, value in LEVELS[wanted].libraries.items():
        environ.setdefault(key, value)
