"""kernels: instruction-set levels of x86-64 and ARM64 CPUs for the native kernels, and which one a process runs.

:data:`LEVELS` names each x86-64 level the kernels are built for, with its compiler flags and the CPU flags it
needs: ``scalar`` (plain C++), ``avx2`` (AVX2, FMA, F16C: integer dots by maddubs/madd), ``avx2-vnni`` (plus
AVX-VNNI's 256-bit vpdpbusd: Intel 12th generation and later, AMD Zen 5), ``avx512`` (AVX-512 BW, VL and VNNI) and
``avx512-amx`` (plus AMX-INT8 tile products for a prefill's K-quant and Q6_K matrices: Intel Xeon from Sapphire
Rapids on). :data:`ARM_LEVELS` does the same for ARM64: ``scalar``, ``neon`` (ARMv8.2-A dot products, ``sdot``) and
``i8mm`` (plus the int8 matrix multiply ``usmmla``: two rows by two columns an instruction); their CPU flags are
Linux's ``/proc/cpuinfo`` names, which macOS's ``sysctl hw.optional.arm.FEAT_*`` values are translated to
(:func:`darwin_flags`). :func:`machine_levels` is the table of a machine's architecture. :func:`chosen_level` is the
best level this CPU runs, or the one ``$LOOKAHEAD_LSP_NATIVE_ISA`` names where the CPU runs it: so one AVX-512
machine measures and tests what an AVX2 laptop runs. :func:`pin_libraries` does the same for PyTorch's own kernels
(ATen, oneDNN, MKL) and the choice of bfloat16 prefill: a forced level below the CPU's leaves the whole process as
such a CPU would run it. It must run before torch is imported (``lookahead_lsp/__init__.py`` calls it), and never
overrides a setting the user made. No torch import here."""

from __future__ import annotations

import logging
import os
import platform
import subprocess
import sys
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
    bf16: bool = False  # a CPU of this level may have bfloat16 instructions (a forced level below: none)


_AVX2 = frozenset({"avx2", "fma", "f16c"})
_AVX512 = _AVX2 | {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"}
_AVX512_FLAGS = ("-march=haswell", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx512vnni")
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
    "avx512": Level(_AVX512_FLAGS, _AVX512, {}, bf16=True),
    "avx512-amx": Level(
        (*_AVX512_FLAGS, "-mamx-tile", "-mamx-int8"), _AVX512 | {"amx_tile", "amx_int8"}, {}, bf16=True
    ),
}
"""The x86-64 levels, lowest first."""

ARM_LEVELS: dict[str, Level] = {
    "scalar": Level(("-march=armv8-a",), frozenset(), {}),
    "neon": Level(("-march=armv8.2-a+dotprod",), frozenset({"asimddp"}), {}),
    "i8mm": Level(("-march=armv8.2-a+dotprod+i8mm",), frozenset({"asimddp", "i8mm"}), {}, bf16=True),
}
"""The ARM64 levels, lowest first."""

_DARWIN_FEATURES = {"FEAT_DotProd": "asimddp", "FEAT_I8MM": "i8mm"}  # sysctl hw.optional.arm.<name> -> Linux's


def architecture(machine: str | None = None) -> str:
    """``x86_64``, ``aarch64`` or ``other`` for ``platform.machine()``'s name (this machine's by default)."""
    name = (platform.machine() if machine is None else machine).lower()
    if name in ("x86_64", "amd64"):
        return "x86_64"
    if name in ("aarch64", "arm64"):  # Linux's name, macOS's and Windows' (ARM64)
        return "aarch64"
    return "other"


def machine_levels(machine: str | None = None) -> dict[str, Level]:
    """The levels of a machine's architecture (this one's by default); empty where the kernels have none."""
    return {"x86_64": LEVELS, "aarch64": ARM_LEVELS}.get(architecture(machine), {})


def cpuinfo_flags(text: str) -> frozenset[str]:
    """The feature flags in ``/proc/cpuinfo`` text: x86's ``flags`` line or ARM's ``Features`` line (the first)."""
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def darwin_flags(text: str) -> frozenset[str]:
    """The Linux names of the features that ``sysctl hw.optional.arm.FEAT_DotProd hw.optional.arm.FEAT_I8MM``
    reports present (``name: 1`` lines)."""
    found = set()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        feature = _DARWIN_FEATURES.get(name.strip().rsplit(".", 1)[-1])
        if feature is not None and value.strip() == "1":
            found.add(feature)
    return frozenset(found)


def cpu_flag_set() -> frozenset[str]:
    """This CPU's feature flags: Linux's ``/proc/cpuinfo``, macOS's ``sysctl`` (ARM features); empty elsewhere."""
    if sys.platform == "darwin":
        names = [f"hw.optional.arm.{name}" for name in _DARWIN_FEATURES]
        try:  # an unknown name (an Intel Mac, an old macOS) is an error message, the others still print
            done = subprocess.run(["sysctl", *names], capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return frozenset()
        return darwin_flags(done.stdout)
    try:
        return cpuinfo_flags(Path("/proc/cpuinfo").read_text())
    except OSError:
        return frozenset()


def runnable_levels(flags: frozenset[str] | None = None, machine: str | None = None) -> list[str]:
    """The levels this CPU (or one with ``flags``, of architecture ``machine``) runs, lowest first; none on an
    architecture without levels."""
    have = cpu_flag_set() if flags is None else flags
    return [name for name, level in machine_levels(machine).items() if level.needs <= have]


def requested_level() -> str | None:
    """The level ``$LOOKAHEAD_LSP_NATIVE_ISA`` names (None: unset, ``native`` or ``auto``); ValueError for a name
    that is no level."""
    name = os.environ.get(ISA_ENV, "").strip().lower()
    if name in ("", "native", "auto"):
        return None
    known = [*LEVELS, *(level for level in ARM_LEVELS if level not in LEVELS)]
    if name not in known:
        raise ValueError(f"{ISA_ENV}={name!r}: use one of {', '.join(known)} (or native)")
    return name


def chosen_level(flags: frozenset[str] | None = None, machine: str | None = None) -> str:
    """The level this process builds its kernel for: the requested one where the CPU runs it, else the best
    it runs (a request it cannot run is logged and ignored)."""
    runnable = runnable_levels(flags, machine) or ["scalar"]
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
    """False where a forced level below those that may have bfloat16 (avx512 and avx512-amx; i8mm: ARMv8.6 brings
    both it and BF16) stands for a CPU without bfloat16 instructions."""
    try:
        wanted = requested_level()
    except ValueError:
        return True
    levels = machine_levels()
    return wanted is None or wanted not in levels or levels[wanted].bf16


def pin_libraries(environ: os._Environ[str] | dict[str, str] = os.environ) -> None:
    """Pin PyTorch's CPU libraries to the forced level (``$LOOKAHEAD_LSP_NATIVE_ISA``), where one is forced;
    a variable the user set stays as set."""
    try:
        wanted = requested_level()
    except ValueError:
        return
    if wanted is None:
        return
    level = machine_levels().get(wanted)
    for key, value in (level.libraries if level is not None else {}).items():
        environ.setdefault(key, value)
