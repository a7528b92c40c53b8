"""llama.cpp's CPU backend at our kernel's instruction-set level: the peer measured as such a CPU would run it.

The llama.cpp build that ``scripts/get-engine.sh`` installs ships one CPU backend library per x86 level
beside its binary (``libggml-cpu-haswell.so`` for AVX2, ``-alderlake`` for AVX-VNNI, ``-icelake`` for AVX-512
VNNI, ...) and loads the best one the CPU runs from the executable's directory. Where our kernel's level is
forced (``$LOOKAHEAD_LSP_NATIVE_ISA``, :mod:`decoder.kernels.isa`), :func:`pinned_binary` makes a directory holding a
copy of the binary and only the matching backend, so the peer runs at the same level as ours; otherwise the
peer runs as installed. :func:`engine_backend` names the backend a server started now loads.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from lookahead_lsp.decoder.kernels.isa import requested_level

# Our level -> ggml's backend names for it, preferred first (ggml/src/CMakeLists.txt's GGML_CPU_ALL_VARIANTS).
GGML_BACKENDS: dict[str, tuple[str, ...]] = {
    "scalar": ("x64", "sse42"),
    "avx2": ("haswell",),
    "avx2-vnni": ("alderlake",),
    "avx512": ("icelake", "cascadelake"),
    "avx512-amx": ("sapphirerapids",),
}
_LOADED = re.compile(r"loaded CPU backend from (\S+)")


def backend_for(level: str, available: set[str]) -> str | None:
    """ggml's backend name for our ``level`` among the ``available`` ones (None: none matches)."""
    return next((name for name in GGML_BACKENDS.get(level, ()) if name in available), None)


def pinned_binary(wrapper: Path, level: str | None = None) -> tuple[Path, str] | None:
    """A llama-server binary that can load only ``level``'s backend (the forced level by default), and that
    backend's name; None where no level is forced or the install holds no such backend.

    ``wrapper`` is the installed launcher script (it sets the library path and runs ``root/usr/bin``'s binary);
    the copy lives in ``<wrapper's dir>/levels/<level>/`` and is reused."""
    level = level if level is not None else requested_level()
    binaries = wrapper.parent / "root" / "usr" / "bin"
    if level is None or not (binaries / "llama-server").is_file():
        return None
    libraries = {p.name[len("libggml-cpu-") : -len(".so")]: p for p in binaries.glob("libggml-cpu-*.so")}
    name = backend_for(level, set(libraries))
    if name is None:
        return None
    directory = wrapper.parent / "levels" / level
    directory.mkdir(parents=True, exist_ok=True)
    binary = directory / "llama-server"
    if not binary.is_file():  # a copy: ggml finds its backends beside the real path of the executable
        shutil.copy2(binaries / "llama-server", binary)
    library = directory / libraries[name].name
    if not library.exists():
        library.symlink_to(libraries[name].resolve())
    return binary, name


def library_path(wrapper: Path) -> str | None:
    """The ``LD_LIBRARY_PATH`` the installed launcher sets (None: it sets none)."""
    try:
        match = re.search(r'LD_LIBRARY_PATH="([^"]*)"', wrapper.read_text())
    except OSError:
        return None
    return match.group(1) if match else None


def engine_backend(wrapper: Path) -> str:
    """The CPU backend llama-server loads here now: the forced level's, or what ggml picks for this CPU (asked
    of the installed ``llama-bench``, which names it on start-up); ``unknown`` where neither tells."""
    pinned = pinned_binary(wrapper)
    if pinned is not None:
        return f"{pinned[1]} (pinned)"
    try:
        probe = subprocess.run(
            [str(wrapper.parent / "llama-bench"), "--list-devices"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return loaded_backend(probe.stderr + probe.stdout) or "unknown"


def loaded_backend(log_text: str) -> str | None:
    """The CPU backend a llama-server's log says it loaded (e.g. ``haswell``), None where it says none."""
    match = _LOADED.search(log_text)
    if match is None:
        return None
    stem = Path(match.group(1)).name
    return stem[len("libggml-cpu-") : -len(".so")] if stem.startswith("libggml-cpu-") else stem
