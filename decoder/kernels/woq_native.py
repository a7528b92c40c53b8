"""kernels: the native CPU kernels, built once per machine and loaded with ctypes: the weight-only-quantized matrix
product (decoder/woq_kernel.cpp), the decoding passes' row attention (decoder/row_kernel.cpp), the per-row steps
(decoder/layer_kernel.cpp) and a whole decoder layer made of them (decoder/pass_kernel.cpp).

The library is compiled on first use with the machine's C++ compiler for one instruction-set level
(decoder/kernels/isa.py: on x86-64 scalar C++, AVX2 + FMA, AVX2 + AVX-VNNI, AVX-512 VNNI, AVX-512 + AMX-INT8; on
ARM64 scalar C++, NEON dot products, NEON + i8mm; by default the best this CPU runs, ``$LOOKAHEAD_LSP_NATIVE_ISA``
names another it runs) into the cache directory, keyed by the source, the flags, the compiler and the CPU's flags,
so a cache shared between machines never hands one CPU another's build. Every level computes the same bits
(decoder/woq_kernel.cpp), so one machine tests and measures them all (the ARM64 levels: under emulation,
tests/decoder/test_arm_kernels.py). It joins PyTorch's OpenMP runtime (the ``libgomp`` torch has loaded; on
macOS, Apple's clang and torch's ``libomp.dylib``), so it uses torch's thread count without a second pool.
No compiler, a failed build or a wrong answer on a probe: :func:`native_kernel` returns None and the callers
keep ATen's int4 kernel (decoder/packed_linear.py) and the flash-attention row plan (decoder/row_attention.py);
the reason is logged once.

``$LOOKAHEAD_LSP_NATIVE=0`` turns the native kernel off (for comparisons: ``lookahead-lsp bench passes``).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import torch

from lookahead_lsp.decoder.kernels.isa import architecture, chosen_level, cpu_flag_set, machine_levels
from lookahead_lsp.decoder.kernels.woq_layout import LAYOUTS, WoqJob, WoqProduct, WoqWeight, fill_job, woq_state
from lookahead_lsp.decoder.weights.cache import cache_root
from lookahead_lsp.decoder.weights.gguf_blocks import AffineGroups, SixBitGroups, block_bytes, read_affine

logger = logging.getLogger(__name__)

# matrix products, attention, per-row steps, a whole layer
SOURCES = ("woq_kernel.cpp", "row_kernel.cpp", "layer_kernel.cpp", "pass_kernel.cpp")
HEADERS = ("native_math.h", "kernel_api.h")  # included by the sources: part of the build's key, never compiled alone
# the numerics, the same for every build of every level (a multiply and an add stay two roundings unless the
# source writes fmaf, whatever the compiler's default contraction)
FLAGS = ("-O3", "-std=c++17", "-ffp-contract=off", "-fno-trapping-math")
OFF_ENV = "LOOKAHEAD_LSP_NATIVE"
KEPT_BUILDS = 3  # builds of a level kept in the cache, the most recently used (others: older sources or compilers)


class ProductRef(ctypes.Structure):
    """A :class:`WoqProduct` as decoder/kernels/kernel_api.h's ``Product`` holds it (its jobs, their count, the
    output's width)."""

    _fields_ = [("jobs", ctypes.c_void_p), ("count", ctypes.c_int64), ("rows", ctypes.c_int64)]


class LayerWeights(ctypes.Structure):
    """One decoder layer as decoder/kernels/kernel_api.h's ``Layer`` holds it (same fields, same order): raw
    pointers, so whoever makes one keeps its products and norms alive (:func:`layer_weights`)."""

    _fields_ = [
        ("qkv", ProductRef),
        ("o", ProductRef),
        ("gate_up", ProductRef),
        ("down", ProductRef),
        ("post_norm", ctypes.c_void_p),
        ("next_norm", ctypes.c_void_p),
        ("hidden", ctypes.c_int64),
        ("heads", ctypes.c_int64),
        ("kv_heads", ctypes.c_int64),
        ("dim", ctypes.c_int64),
        ("eps", ctypes.c_float),
        ("scale", ctypes.c_float),
    ]


@dataclass(frozen=True)
class LayerShape:
    """The attention's shape and the norms' epsilon, the same for every layer of a model."""

    hidden: int
    heads: int
    kv_heads: int
    dim: int
    eps: float
    scale: float


def layer_weights(
    products: tuple[WoqProduct, WoqProduct, WoqProduct, WoqProduct],
    post_norm: torch.Tensor,
    next_norm: torch.Tensor,
    shape: LayerShape,
) -> LayerWeights:
    """The :class:`LayerWeights` of a layer's products (q|k|v, o, gate|up, down) and its norms (float32
    contiguous: the post-attention norm and the next layer's input norm, or the final norm after the last)."""
    refs = [ProductRef(ctypes.cast(p.jobs, ctypes.c_void_p), len(p.jobs), p.rows) for p in products]
    return LayerWeights(
        *refs, post_norm.data_ptr(), next_norm.data_ptr(),
        shape.hidden, shape.heads, shape.kv_heads, shape.dim, shape.eps, shape.scale,
    )  # fmt: skip


class WoqKernel:
    """The built library's functions, with their argument types declared once."""

    def __init__(self, library: Path) -> None:
        self.library = library
        lib = ctypes.CDLL(str(library))
        p, i64, i32, f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_float
        self._linear = lib.woq_linear
        self._linear.argtypes = [p, i64, ctypes.POINTER(WoqJob), i32, p, i64, i32]
        self._dequantize = lib.woq_dequantize
        self._dequantize.argtypes = [ctypes.POINTER(WoqJob), p, p, i32]
        self._attention = lib.row_attention
        self._attention.argtypes = [p, i64, i64, i64, i64, p, i64, i64, p, i64, i64, p, p, p, f32, p, i32, i32]
        self._norm = lib.residual_rms_norm
        self._norm.argtypes = [p, p, i64, i64, p, f32, p]
        self._rope = lib.rope_rows
        self._rope.argtypes = [p, i64, i64, i64, i64, p, p]
        self._swiglu = lib.swiglu_rows
        self._swiglu.argtypes = [p, i64, i64, p, i32]
        self._layer = lib.native_layer
        layer = ctypes.POINTER(LayerWeights)
        self._layer.argtypes = [layer, p, p, i64, p, p, p, i64, i64, p, i64, i64, i64, p, p, p, p, i64, i64, i32, i32]
        self._scratch = lib.layer_scratch_floats
        self._scratch.argtypes = [layer, i64]
        self._scratch.restype = ctypes.c_int64
        for fn in (self._linear, self._dequantize, self._attention, self._norm, self._rope, self._swiglu, self._layer):
            fn.restype = ctypes.c_int
        lib.woq_isa.restype = ctypes.c_char_p
        self.isa: str = lib.woq_isa().decode()
        self._pair_rows = lib.woq_pair_rows
        self._pair_rows.argtypes = [i64]
        self._pair_rows.restype = i64

    def __deepcopy__(self, memo: dict[int, object]) -> WoqKernel:
        return self  # a handle on a loaded library: copies of a model share it

    @property
    def two_tiles(self) -> bool:
        """Whether this build has the AVX-512 two-tile loop: the weights it multiplies are laid out in pairs
        (:attr:`WoqWeight.paired`), the order that loop reads as one stream."""
        return self.pair_rows() is not None

    def pair_rows(self, mask: int | None = None) -> int | None:
        """Which passes of 1 to 4 rows take the AVX-512 two-tile loop (bit n - 1: passes of n rows): set to
        ``mask`` where given; the mask in force before, or None at a level without that loop."""
        before = int(self._pair_rows(-1 if mask is None else mask))
        return None if before < 0 else before

    def linear(self, x: torch.Tensor, product: WoqProduct) -> torch.Tensor:
        """``x (batch, cols) float32 -> [x W_i^T + b_i for each weight] side by side, (batch, rows) float32``."""
        x = x.contiguous()
        if x.dtype != torch.float32 or x.dim() != 2 or x.shape[-1] != product.cols:
            raise ValueError(f"woq_linear needs float32 rows of {product.cols}, got {x.dtype} {tuple(x.shape)}")
        out = torch.empty(x.shape[0], product.rows, dtype=torch.float32)
        jobs = product.jobs
        status = self._linear(x.data_ptr(), x.shape[0], jobs, len(jobs), out.data_ptr(), product.rows, _threads())
        if status != 0:
            raise ValueError(f"woq_linear does not know layout {[w.layout for w, _ in product.weights]}")
        return out

    def residual_norm(
        self, residual: torch.Tensor, delta: torch.Tensor | None, weight: torch.Tensor, eps: float, out: torch.Tensor
    ) -> None:
        """``residual += delta`` (unless None), then ``out`` = its RMS norm times ``weight``, row by row; all
        (rows, cols) float32 contiguous (``weight`` (cols,)), ``residual`` and ``out`` written in place."""
        rows, cols = residual.shape
        delta_pointer = None if delta is None else delta.data_ptr()
        if self._norm(residual.data_ptr(), delta_pointer, rows, cols, weight.data_ptr(), eps, out.data_ptr()) != 0:
            raise ValueError(f"residual_rms_norm takes widths in sixteens, not {cols}")

    def rope(self, x: torch.Tensor, heads: int, dim: int, cos: torch.Tensor, sin: torch.Tensor) -> None:
        """Rotate the first ``heads`` heads of ``dim`` values of each row of ``x`` (rows, cols) float32 (rows
        contiguous) in place by the row's ``cos``/``sin`` (rows, dim) contiguous, as transformers' rotate_half."""
        if x.stride(-1) != 1 or heads * dim > x.shape[-1]:
            raise ValueError("rope_rows needs rows of at least heads * dim contiguous floats")
        status = self._rope(x.data_ptr(), x.shape[0], heads, dim, x.stride(0), cos.data_ptr(), sin.data_ptr())
        if status != 0:
            raise ValueError(f"rope_rows takes even head sizes, not {dim}")

    def swiglu(self, gate_up: torch.Tensor) -> torch.Tensor:
        """``gate_up`` (rows, 2 * inter) float32 contiguous -> ``silu(gate) * up`` (rows, inter)."""
        rows, inter = gate_up.shape[0], gate_up.shape[1] // 2
        out = torch.empty(rows, inter, dtype=torch.float32)
        self._swiglu(gate_up.data_ptr(), rows, inter, out.data_ptr(), _threads())
        return out

    def attention(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        keys: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        scale: float,
    ) -> torch.Tensor:
        """Each row's attention over its own keys (decoder/row_kernel.cpp): ``query`` (rows, heads, dim),
        ``key``/``value`` (kv_heads, stored, dim) float32 or float16 (:func:`cache_half`) with dim contiguous,
        ``keys`` = (prefix, extra_start, extra) int64: row j sees entries ``0 .. prefix[j]-1`` then
        ``extra[extra_start[j]:extra_start[j+1]]``. Returns (rows, heads, dim)."""
        rows, heads, dim = query.shape
        query = query.contiguous()
        if query.dtype != torch.float32:
            raise ValueError("row_attention needs float32 queries")
        half = cache_half(key, value)
        out = torch.empty(rows, heads, dim, dtype=torch.float32)
        prefix, start, extra = keys
        status = self._attention(
            query.data_ptr(), rows, heads, key.shape[0], dim,
            key.data_ptr(), key.stride(0), key.stride(1), value.data_ptr(), value.stride(0), value.stride(1),
            prefix.data_ptr(), start.data_ptr(), extra.data_ptr(), scale, out.data_ptr(), _threads(), half,
        )  # fmt: skip
        if status != 0:
            raise ValueError(f"row_attention takes head sizes in sixteens, not {dim}")
        return out

    def scratch_floats(self, weights: LayerWeights, rows: int) -> int:
        """Floats of scratch that :meth:`layer` needs for a pass of ``rows`` rows."""
        return int(self._scratch(ctypes.byref(weights), rows))

    def layer(
        self,
        weights: LayerWeights,
        residual: torch.Tensor,
        x: torch.Tensor,
        rotary: tuple[torch.Tensor, torch.Tensor],
        cache: tuple[torch.Tensor, torch.Tensor],
        keys: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        scratch: torch.Tensor,
        kv_only: int = 0,
    ) -> None:
        """One decoder layer of a pass in one call (decoder/kernels/pass_kernel.cpp): ``x`` (rows, hidden), the
        layer's normed input, becomes the next layer's; ``residual`` is summed in place. ``rotary``: the rows'
        (cos, sin) (rows, dim). ``cache``: the layer's (keys, values) views (kv_heads, held + rows, dim), float32
        or float16, dim contiguous, whose last ``rows`` entries the pass's keys and values are written to. ``keys`` as
        :meth:`attention`'s; ``scratch``: float32, at least :meth:`scratch_floats`. The first ``kv_only`` rows
        (fewer than all) only write their keys and values: their rows of ``residual`` and ``x`` are left as
        they were."""
        (key, value), (cos, sin), rows = cache, rotary, x.shape[0]
        half = cache_half(key, value)
        prefix, start, extra = keys
        status = self._layer(
            ctypes.byref(weights), residual.data_ptr(), x.data_ptr(), rows, cos.data_ptr(), sin.data_ptr(),
            key.data_ptr(), key.stride(0), key.stride(1), value.data_ptr(), value.stride(0), value.stride(1),
            key.shape[1] - rows, prefix.data_ptr(), start.data_ptr(), extra.data_ptr(), scratch.data_ptr(),
            scratch.numel(), kv_only, _threads(), half,
        )  # fmt: skip
        if status != 0:
            step = {-1: "a product's layout", -2: "attention's head size", -3: "the norm's width", -4: "the rotary",
                    -5: "too little scratch or rows to compute"}  # fmt: skip
            raise ValueError(f"native_layer cannot run this layer: {step.get(status, status)}")

    def dequantize(self, weight: WoqWeight, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        """The weight as a dense matrix (rows, cols) of ``dtype`` (bfloat16 or float32): for a prefill's dense
        products. Each value is ``code * scale + offset`` in float32 (one fused multiply-add), then rounded."""
        if dtype not in (torch.bfloat16, torch.float32):
            raise ValueError(f"woq_dequantize writes bfloat16 or float32, not {dtype}")
        out = torch.empty(weight.rows, weight.groups * 32, dtype=dtype)
        job = WoqJob()
        fill_job(job, weight, None)
        wide, narrow = (out.data_ptr(), None) if dtype == torch.float32 else (None, out.data_ptr())
        if self._dequantize(ctypes.byref(job), wide, narrow, _threads()) != 0:
            raise ValueError(f"woq_dequantize does not know layout {weight.layout}")
        return out


def cache_half(key: torch.Tensor, value: torch.Tensor) -> int:
    """1 for a cache of float16 keys and values, 0 for float32 (the kernel reads either, dim contiguous); a
    ValueError for anything else."""
    if key.dtype != value.dtype or key.dtype not in (torch.float32, torch.float16):
        raise ValueError(f"the native kernel's cache holds float32 or float16, not {key.dtype} and {value.dtype}")
    if key.stride(-1) != 1 or value.stride(-1) != 1:
        raise ValueError("the native kernel needs cache views with contiguous rows")
    return int(key.dtype == torch.float16)


def _threads() -> int:
    return torch.get_num_threads()


def compiler() -> str | None:
    """The C++ compiler: ``$CXX``, else ``g++``, ``c++`` or ``clang++`` on the PATH."""
    named = os.environ.get("CXX")
    if named:
        return shutil.which(named) or named
    for candidate in ("g++", "c++", "clang++"):
        found = shutil.which(candidate)
        if found:
            return found
    return None


def cpu_flags() -> str:
    """The CPU's feature flags, else the processor's name: part of the build's key."""
    return " ".join(sorted(cpu_flag_set())) or platform.processor() or platform.machine()


def compile_flags(level: str, machine: str | None = None) -> tuple[str, ...]:
    """The flags that decide what ``level`` (of ``machine``'s architecture, this one's by default) computes:
    :data:`FLAGS` and the level's ``-march``; a library build (:func:`library_flags`) and the ARM64 test driver
    (tests/decoder/test_arm_kernels.py) both compile with them."""
    return FLAGS + machine_levels(machine)[level].flags


def library_flags(system: str = sys.platform, torch_lib: Path | None = None) -> tuple[str, ...]:
    """The flags that make a shared library joined to torch's OpenMP runtime: ``-fopenmp`` (GCC's libgomp,
    which torch's Linux wheels load); on macOS a ``.dylib`` from Apple's clang, which takes OpenMP as a
    preprocessor flag and links torch's own ``libomp.dylib`` (``torch_lib``: torch's ``lib`` directory; none
    there: no OpenMP, the kernel runs its loops on one thread)."""
    if system != "darwin":
        return ("-mtune=native", "-fopenmp", "-shared", "-fPIC")
    lib = torch_lib if torch_lib is not None else Path(torch.__file__).parent / "lib"
    if not (lib / "libomp.dylib").is_file():
        return ("-dynamiclib",)
    return ("-dynamiclib", "-Xpreprocessor", "-fopenmp", f"-L{lib}", "-lomp", f"-Wl,-rpath,{lib}")


def _compiler_version(cxx: str) -> str:
    try:
        done = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout


def kernel_sources() -> dict[str, bytes]:
    """The kernel's sources and headers by file name (decoder/kernels/)."""
    package = resources.files("lookahead_lsp.decoder.kernels")
    return {name: package.joinpath(name).read_bytes() for name in SOURCES + HEADERS}


def build(root: Path, cxx: str, level: str) -> Path:
    """The kernel library for ``level`` (one of this machine's levels: decoder/kernels/isa.py) under ``root``,
    compiled now unless already there (written to a temporary name and renamed: never half a library).
    RuntimeError with the compiler's message on failure."""
    sources = kernel_sources()
    flags = compile_flags(level) + library_flags()
    key = hashlib.sha256(
        b"\0".join([*sources.values(), " ".join(flags).encode(), _compiler_version(cxx).encode(), cpu_flags().encode()])
    ).hexdigest()[:20]
    suffix = ".dylib" if sys.platform == "darwin" else ".so"
    target = root / "native-v2" / f"woq-{level}-{key}{suffix}"
    if target.is_file():
        _touch(target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=target.parent) as scratch:
        paths = [Path(scratch) / name for name in sources]
        for path, text in zip(paths, sources.values(), strict=True):
            path.write_bytes(text)
        partial = Path(scratch) / target.name
        try:
            done = subprocess.run(
                [cxx, *flags, "-o", str(partial), *(str(p) for p in paths if p.name in SOURCES)],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
                env={**os.environ, "TMPDIR": scratch},  # the compiler's own temporaries in the cache, not /tmp
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise RuntimeError(f"{cxx}: {exc}") from exc
        if done.returncode != 0:
            raise RuntimeError(f"{cxx} failed: {done.stderr.strip()[-600:]}")
        os.replace(partial, target)
    prune_builds(target.parent, level, suffix)
    return target


def _touch(path: Path) -> None:
    """Mark ``path`` used now: its access time, what :func:`prune_builds` keeps by. Its modification time stays
    the build's: stored timings made before it are another build's (``decoder/timing_load.py``), and one marked
    at every load would make every timing look older than the build. A read-only cache is left as it is."""
    with contextlib.suppress(OSError):
        os.utime(path, (time.time(), path.stat().st_mtime))


def prune_builds(folder: Path, level: str, suffix: str, keep: int = KEPT_BUILDS) -> list[Path]:
    """Remove all but the ``keep`` most recently used builds of ``level`` in ``folder`` (by access time, which
    :func:`_touch` marks at each load; each build of other
    sources, flags or compiler is a library of its own, 0.4-0.8 MB, and its cost tables beside it name it); returns
    the files removed. A build another process has loaded stays mapped there until it exits."""
    pattern = re.compile(rf"woq-{re.escape(level)}-[0-9a-f]{{20}}{re.escape(suffix)}")
    builds = []
    for path in folder.glob(f"woq-{level}-*{suffix}"):
        try:
            if pattern.fullmatch(path.name):
                builds.append((path.stat().st_atime, path))
        except OSError:  # removed meanwhile
            continue
    removed = []
    for _, library in sorted(builds, reverse=True)[keep:]:
        for path in [library, *folder.glob(f"*-{library.stem}-*.json")]:  # cost and pair tables named after it
            try:
                path.unlink()
                removed.append(path)
            except OSError:
                continue
    if removed:
        logger.info("native kernel: removed %d files of older %s builds from %s", len(removed), level, folder)
    return removed


def quantize_activations(x: torch.Tensor, supers: bool = False) -> torch.Tensor:
    """What the kernel multiplies: each group of 32 of a float32 row (``supers``: each super-block of 256, as for
    a K-quant or Q6_K weight) rounded to int8 steps of ``max|x| / 127`` (half to even), returned dequantized
    (float64)."""
    groups = x.float().reshape(x.shape[0], -1, 256 if supers else 32)
    top = groups.abs().amax(dim=-1, keepdim=True)
    inv = torch.where(top > 0, torch.tensor(127.0) / top, torch.zeros_like(top))
    return (torch.round(groups * inv).double() * (top / 127.0).double()).reshape(x.shape)


def reference_product(x: torch.Tensor, weight: torch.Tensor, supers: bool = False) -> torch.Tensor:
    """The kernel's product in float64 with the exact ``weight`` (rows, cols): ``x`` as the kernel sees it
    (``supers``: a K-quant or Q6_K weight's, quantized per super-block)."""
    return quantize_activations(x, supers) @ weight.double().t()


def reference_linear(
    x: torch.Tensor, codes: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor, supers: bool = False
) -> torch.Tensor:
    """The kernel's product in float64: ``codes`` (rows, cols) unpacked, ``x`` as the kernel sees it (``supers``:
    a K-quant's)."""
    rows, cols = codes.shape
    grouped = codes.double().reshape(rows, -1, 32) * scale.double()[..., None] + offset.double()[..., None]
    return reference_product(x, grouped.reshape(rows, cols), supers)


def k_quant_groups(rows: int, cols: int, seed: int, type_name: str = "Q4_K") -> AffineGroups:
    """A Q4_K (or Q5_K) tensor's groups as the GGUF reader gives them (with their super-blocks), from random valid
    blocks: any bytes, but finite float16 d and dmin."""
    generator = torch.Generator().manual_seed(seed)
    shape = (rows * cols // 256, block_bytes(type_name))  # a block: one super-block of 256 weights
    blocks = torch.randint(0, 256, shape, generator=generator, dtype=torch.uint8)
    for at in (0, 2):  # d and dmin
        blocks[:, at : at + 2] = (torch.rand(shape[0], generator=generator) * 0.01).half().view(torch.uint8).view(-1, 2)
    groups = read_affine(blocks.reshape(rows, -1).numpy(), type_name, rows, cols)
    if groups is None or groups.levels is None:
        raise ValueError(f"{type_name}: not a K-quant the GGUF reader knows")
    return groups


def probe_weights(generator: torch.Generator) -> list[AffineGroups | SixBitGroups]:
    """A small weight of every layout and of the super-block formats (a K-quant's two levels, Q6_K's sub-block
    scales): 12 rows (a tile and a half), random codes and scales."""
    weights: list[AffineGroups | SixBitGroups] = [k_quant_groups(12, 512, seed=0)]
    for layout in LAYOUTS:
        codes = torch.randint(0, 2**layout, (12, 64), generator=generator, dtype=torch.uint8)
        scale = torch.rand(12, 2, generator=generator) + 0.5
        offset = -torch.rand(12, 2, generator=generator)
        weights.append(AffineGroups(codes.numpy(), scale.numpy(), offset.numpy(), layout))
    codes = torch.randint(0, 64, (12, 512), generator=generator, dtype=torch.uint8)
    d = (torch.rand(12, 2, generator=generator) * 0.01).half().float()
    sub = torch.randint(-128, 128, (12, 32), generator=generator, dtype=torch.int8)
    weights.append(SixBitGroups(codes.numpy(), d.numpy(), sub.numpy()))
    return weights


def probe(kernel: WoqKernel) -> bool:
    """Whether the kernel agrees with :func:`reference_product` on a small weight of every layout, its tiles in
    either order (:attr:`WoqWeight.paired`)."""
    generator = torch.Generator().manual_seed(0)
    for groups in probe_weights(generator):
        x = torch.randn(3, groups.shape[1], generator=generator)
        supers = isinstance(groups, SixBitGroups) or groups.levels is not None  # activations per super-block
        want = reference_product(x, torch.from_numpy(groups.dequantize()), supers)
        for paired in (False, True):
            got = kernel.linear(x, WoqProduct.of([(WoqWeight.of(woq_state(groups), paired), None)]))
            if not torch.allclose(got.double(), want, rtol=1e-4, atol=1e-4 * float(want.abs().max())):
                return False
    return True


def load_kernel(root: Path, cxx: str | None, level: str | None = None) -> WoqKernel | None:
    """The kernel for ``level`` (default: :func:`decoder.isa.chosen_level`) built with ``cxx`` under ``root``
    and probed; None where it cannot be had (reason logged)."""
    if architecture() == "other":
        logger.info("native kernel: x86-64 and ARM64 only; ATen's int4 kernel instead")
        return None
    if cxx is None:
        logger.warning("no C++ compiler: decoding on ATen's int4 kernel (slower); install g++ for the native one")
        return None
    try:
        kernel = WoqKernel(build(root, cxx, level or chosen_level()))
    except (RuntimeError, OSError) as exc:
        logger.warning("native kernel unavailable (%s): decoding on ATen's int4 kernel", exc)
        return None
    if not probe(kernel):
        logger.warning("native kernel disagrees with its reference on a probe: not used")
        return None
    logger.info("native kernel %s (%s)", kernel.library.name, kernel.isa)
    return kernel


def native_enabled() -> bool:
    """False where ``$LOOKAHEAD_LSP_NATIVE`` turns the native kernel off (0, false, no, off)."""
    return os.environ.get(OFF_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


@functools.cache
def built_kernel() -> WoqKernel | None:
    """The kernel for this machine (its chosen level), built on first use (once a process), whether or not
    ``$LOOKAHEAD_LSP_NATIVE`` turns its use off (the kernel's own tests); None where it cannot be had."""
    return load_kernel(cache_root(), compiler())


@functools.cache
def native_kernel() -> WoqKernel | None:
    """The native kernel the decoders use: :func:`built_kernel`, None where it cannot be had or is turned off."""
    if not native_enabled():
        logger.info("native kernel off (%s)", OFF_ENV)
        return None
    return built_kernel()
