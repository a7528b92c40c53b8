"""Scanning workspace roots: which files are source text worth indexing.

Rules: ``.gitignore`` files at every level (``pathspec``'s ``GitIgnoreSpec``; a deeper file's matching pattern
wins, patterns are relative to their directory, an ignored directory is never entered), built-in skipped
directories (VCS metadata, virtual envs, dependency and build output), the configured include/exclude globs
(gitignore syntax, relative to the root), a size limit, and no binary files (a NUL byte in the first 8 KiB or
not UTF-8). Symlinks are followed only inside the root; loops, files removed mid-scan and permission errors
are skipped and counted by reason, never fatal. One bad input never disables the scan: a pattern that does
not compile is dropped with one warning, a file name that is not UTF-8 is skipped with one warning, and a
FIFO, socket or device is never opened (:func:`read_regular`).
"""

from __future__ import annotations

import logging
import os
import stat
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pathspec import GitIgnoreSpec

BINARY_SNIFF_BYTES = 8192
log = logging.getLogger(__name__)

DEFAULT_SKIP_DIRS: frozenset[str] = frozenset(
    {
        ".git", ".hg", ".svn", ".bzr", ".venv", "venv", "node_modules", "bower_components", "__pycache__",
        ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", ".tox", ".nox", ".eggs", ".gradle",
        ".next", ".nuxt", ".terraform", ".cache", ".idea", "build", "dist", "target", "out", "_build",
    }
)  # fmt: skip
SKIP_DIR_SUFFIXES: tuple[str, ...] = (".egg-info",)
VENV_MARKER = "pyvenv.cfg"


class Skip:
    """Reasons a path is left out (the keys of ``ScanResult.skipped``)."""

    IGNORED = "gitignored"
    EXCLUDED = "excluded"
    NOT_INCLUDED = "not_included"
    SKIPPED_DIR = "skipped_dir"
    VIRTUALENV = "virtualenv"
    TOO_LARGE = "too_large"
    BINARY = "binary"
    NOT_UTF8 = "not_utf8"
    SYMLINK_ESCAPE = "symlink_escape"
    SYMLINK_LOOP = "symlink_loop"
    DUPLICATE = "duplicate"
    VANISHED = "vanished"
    PERMISSION = "permission"
    NOT_REGULAR = "not_regular"
    MAX_FILES = "max_files"
    BAD_NAME = "name_not_utf8"


@dataclass(frozen=True)
class WorkspaceConfig:
    """What to index. ``include``/``exclude`` are gitignore-style globs relative to each root."""

    max_file_bytes: int = 1_000_000
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_files: int = 100_000
    skip_dirs: frozenset[str] = DEFAULT_SKIP_DIRS


DEFAULT_CONFIG = WorkspaceConfig()


@dataclass(frozen=True)
class ScannedFile:
    """A candidate file: its absolute path, path relative to the root (posix), size and mtime."""

    path: Path
    rel: str
    size: int
    mtime_ns: int


@dataclass
class ScanResult:
    files: list[ScannedFile] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    dirs: list[Path] = field(default_factory=list)  # the directories the scan read (the root first)


# ---------------------------------------------------------------------------------------------- pure rules


IgnoreLayer = tuple[str, GitIgnoreSpec]  # (directory relative to the root, "" for the root; its spec)


_WARNED: set[tuple[str, str]] = set()  # (where, pattern) already reported: one warning each per process


def _unclosed_bracket(pattern: str) -> bool:
    """Whether a pattern opens a ``[`` it never closes. Git's wildmatch never matches such a pattern, but
    pathspec takes the ``[`` literally, so an include of ``[`` would match no file at all."""
    if pattern.startswith("#"):
        return False
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "[":
            j = i + 1
            j += j < len(pattern) and pattern[j] in "!^"
            j += j < len(pattern) and pattern[j] == "]"  # a "]" right after "[" or "[!" is a member
            close = pattern.find("]", j)
            if close < 0:
                return True
            i = close
        i += 1
    return False


def pattern_problem(pattern: str) -> str | None:
    """Why a gitignore-style pattern cannot be used (None: it can): an unclosed ``[``, or it does not compile."""
    if _unclosed_bracket(pattern):
        return "an unclosed '['"
    try:
        GitIgnoreSpec.from_lines([pattern])
    except Exception as exc:  # re.error, GitIgnorePatternError
        return str(exc) or type(exc).__name__
    return None


def split_patterns(lines: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """The usable patterns, and the others with why (:func:`pattern_problem`), in their order."""
    good: list[str] = []
    bad: list[tuple[str, str]] = []
    for line in lines:
        problem = pattern_problem(line)
        if problem is None:
            good.append(line)
        else:
            bad.append((line, problem))
    return good, bad


def lenient_spec(lines: Sequence[str], where: str) -> GitIgnoreSpec:
    """The spec of ``lines`` without the patterns that cannot be used (``[z-a]``, a lone ``!``, an unclosed
    ``[``); each bad pattern is logged once. One bad line never disables the rest."""
    if not any(_unclosed_bracket(line) for line in lines):
        try:
            return GitIgnoreSpec.from_lines(lines)
        except Exception:  # re.error, GitIgnorePatternError: find the culprits
            pass
    good, bad = split_patterns(lines)
    for line, problem in bad:
        if (where, line) not in _WARNED:
            _WARNED.add((where, line))
            log.warning("%s: pattern %r ignored (%s)", where, line, problem)
    return GitIgnoreSpec.from_lines(good)


def parse_gitignore(text: str, where: str = ".gitignore") -> GitIgnoreSpec:
    return lenient_spec(text.splitlines(), where)


def is_ignored(layers: Sequence[IgnoreLayer], rel: str, is_dir: bool) -> bool:
    """Git's verdict for ``rel`` under the .gitignore ``layers`` (outermost first): the deepest match wins."""
    for base, spec in reversed(layers):
        if base and not rel.startswith(base + "/"):
            continue
        local = rel[len(base) + 1 :] if base else rel
        verdict = spec.check_file(local + "/" if is_dir else local).include
        if verdict is not None:
            return bool(verdict)
    return False


def glob_spec(patterns: Sequence[str], where: str = "setting") -> GitIgnoreSpec | None:
    """The spec of the include or exclude setting; None when no pattern in it can be used (so an include of
    only bad patterns filters nothing, like no include at all)."""
    spec = lenient_spec(patterns, where) if patterns else None
    return spec if spec is not None and any(p.include is not None for p in spec.patterns) else None


def config_reason(
    config: WorkspaceConfig, rel: str, include: GitIgnoreSpec | None, exclude: GitIgnoreSpec | None
) -> str | None:
    """The include/exclude verdict for a file path relative to the root."""
    if exclude is not None and exclude.match_file(rel):
        return Skip.EXCLUDED
    if include is not None and not include.match_file(rel):
        return Skip.NOT_INCLUDED
    return None


def dir_excluded(rel: str, exclude: GitIgnoreSpec | None) -> str | None:
    """The exclude setting's verdict for a directory itself (``vendor/`` leaves the whole tree out, unread)."""
    return Skip.EXCLUDED if exclude is not None and exclude.match_file(rel + "/") else None


def skip_dir_reason(name: str, config: WorkspaceConfig) -> str | None:
    if name in config.skip_dirs or name.endswith(SKIP_DIR_SUFFIXES):
        return Skip.SKIPPED_DIR
    return None


def is_binary(head: bytes) -> bool:
    return b"\0" in head[:BINARY_SNIFF_BYTES]


def decode_source(data: bytes) -> str | None:
    """The text of a source file, or ``None`` when it is binary or not UTF-8."""
    if is_binary(data):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def utf8_name(name: str) -> bool:
    """Whether a file name is valid UTF-8 (else it holds surrogate escapes that no tokenizer takes)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def warn_bad_name(path: Path) -> None:
    where = str(path.parent)
    if (where, "name") not in _WARNED:
        _WARNED.add((where, "name"))
        log.warning("%s: file names that are not UTF-8 are skipped (e.g. %r)", where, path.name)


def is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def read_regular(path: Path, max_bytes: int) -> bytes:
    """Up to ``max_bytes`` of a regular file; OSError (ENOTSUP-like) for anything else.

    A FIFO, socket or device is never opened for reading (its type is checked first), and the open
    itself is non-blocking as a second guard: a FIFO swapped in after the check cannot block the caller.
    """
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise IsADirectoryError(f"{path} is not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(f"{path} is not a regular file")
        chunks: list[bytes] = []
        left = max_bytes
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_source(path: Path, max_bytes: int) -> tuple[str | None, str | None]:
    """(text, None) for an indexable text file, else (None, skip reason). Never blocks on a FIFO."""
    try:
        data = read_regular(path, max_bytes + 1)
    except FileNotFoundError:
        return None, Skip.VANISHED
    except PermissionError:
        return None, Skip.PERMISSION
    except OSError:
        return None, Skip.NOT_REGULAR
    if len(data) > max_bytes:
        return None, Skip.TOO_LARGE
    if is_binary(data):
        return None, Skip.BINARY
    text = decode_source(data)
    return (text, None) if text is not None else (None, Skip.NOT_UTF8)


# ---------------------------------------------------------------------------------------------- the walk


def _read_gitignore(directory: Path) -> GitIgnoreSpec | None:
    path = directory / ".gitignore"
    try:
        return parse_gitignore(read_regular(path, 1 << 20).decode("utf-8", errors="replace"), str(path))
    except OSError:
        return None


class _Walker:
    """One scan of one root; collects files and skip counts."""

    def __init__(self, root: Path, config: WorkspaceConfig) -> None:
        self.root = root.resolve()
        self.config = config
        self.include = glob_spec(config.include, "include setting")
        self.exclude = glob_spec(config.exclude, "exclude setting")
        self.result = ScanResult()
        self._seen: set[tuple[int, int]] = set()

    def skip(self, reason: str) -> None:
        self.result.skipped[reason] += 1

    def run(self) -> ScanResult:
        self._walk(self.root, "", [])
        return self.result

    def _walk(self, directory: Path, rel_dir: str, layers: list[IgnoreLayer]) -> None:
        try:
            info = directory.stat()
            if (info.st_dev, info.st_ino) in self._seen:
                self.skip(Skip.SYMLINK_LOOP)
                return
            self._seen.add((info.st_dev, info.st_ino))
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except FileNotFoundError:
            self.skip(Skip.VANISHED)
            return
        except PermissionError:
            self.skip(Skip.PERMISSION)
            return
        except OSError:
            self.skip(Skip.NOT_REGULAR)
            return
        if rel_dir and any(e.name == VENV_MARKER for e in entries):
            self.skip(Skip.VIRTUALENV)
            return
        self.result.dirs.append(directory)
        spec = _read_gitignore(directory) if any(e.name == ".gitignore" for e in entries) else None
        if spec is not None:
            layers = [*layers, (rel_dir, spec)]
        for entry in entries:
            if len(self.result.files) >= self.config.max_files:
                self.skip(Skip.MAX_FILES)
                return
            self._visit(entry, f"{rel_dir}/{entry.name}" if rel_dir else entry.name, layers)

    def _visit(self, entry: os.DirEntry[str], rel: str, layers: list[IgnoreLayer]) -> None:
        path = Path(entry.path)
        if not utf8_name(entry.name):
            self.skip(Skip.BAD_NAME)
            warn_bad_name(path)
            return
        try:
            info = path.stat()  # follows symlinks
        except FileNotFoundError:
            self.skip(Skip.VANISHED)  # removed mid-scan, or a dangling symlink
            return
        except PermissionError:
            self.skip(Skip.PERMISSION)
            return
        except OSError:
            self.skip(Skip.SYMLINK_LOOP if entry.is_symlink() else Skip.NOT_REGULAR)
            return
        if entry.is_symlink() and not is_within(path.resolve(), self.root):
            self.skip(Skip.SYMLINK_ESCAPE)
            return
        is_dir = stat.S_ISDIR(info.st_mode)
        reason = self._path_reason(entry.name, rel, is_dir, layers)
        if reason is not None:
            self.skip(reason)
        elif is_dir:
            self._walk(path, rel, layers)
        elif not stat.S_ISREG(info.st_mode):
            self.skip(Skip.NOT_REGULAR)
        elif info.st_size > self.config.max_file_bytes:
            self.skip(Skip.TOO_LARGE)
        elif (info.st_dev, info.st_ino) in self._seen:
            self.skip(Skip.DUPLICATE)
        else:
            self._seen.add((info.st_dev, info.st_ino))
            self.result.files.append(ScannedFile(path, rel, info.st_size, info.st_mtime_ns))

    def _path_reason(self, name: str, rel: str, is_dir: bool, layers: list[IgnoreLayer]) -> str | None:
        if is_dir and skip_dir_reason(name, self.config):
            return Skip.SKIPPED_DIR
        if is_ignored(layers, rel, is_dir):
            return Skip.IGNORED
        if is_dir:
            return dir_excluded(rel, self.exclude)
        return config_reason(self.config, rel, self.include, self.exclude)


def scan(root: Path, config: WorkspaceConfig = DEFAULT_CONFIG) -> ScanResult:
    """Candidate files under ``root`` (stat-level rules; :func:`read_source` applies the content rules)."""
    return _Walker(Path(root), config).run()


def iter_sources(root: Path, config: WorkspaceConfig = DEFAULT_CONFIG) -> Iterator[tuple[ScannedFile, str]]:
    """Scan and read: (file, text) for every indexable file; skips are not reported (see :func:`scan`)."""
    for scanned in scan(root, config).files:
        text, _ = read_source(scanned.path, config.max_file_bytes)
        if text is not None:
            yield scanned, text


# ---------------------------------------------------------------------------------------------- one path


class PathFilter:
    """The scan's rules for a single path under ``root`` (for watcher events); .gitignore parses cached."""

    def __init__(self, root: Path, config: WorkspaceConfig = DEFAULT_CONFIG) -> None:
        self.root = Path(root).resolve()
        self.config = config
        self.include = glob_spec(config.include, "include setting")
        self.exclude = glob_spec(config.exclude, "exclude setting")
        self._specs: dict[Path, GitIgnoreSpec | None] = {}

    def invalidate(self) -> None:
        """Forget cached .gitignore parses (call when a .gitignore changes)."""
        self._specs.clear()

    def _spec(self, directory: Path) -> GitIgnoreSpec | None:
        if directory not in self._specs:
            self._specs[directory] = _read_gitignore(directory)
        return self._specs[directory]

    def reason(self, path: Path, is_dir: bool = False) -> str | None:
        """Why ``path`` would be left out by a scan (``None``: indexable by path); content not checked."""
        path = Path(os.path.abspath(path))
        if not is_within(path, self.root) or path == self.root:
            return Skip.SYMLINK_ESCAPE
        if not utf8_name(str(path)):
            return Skip.BAD_NAME
        parts = path.relative_to(self.root).parts
        layers: list[IgnoreLayer] = []
        directory = self.root
        for depth, name in enumerate(parts):
            rel = "/".join(parts[: depth + 1])
            last = depth == len(parts) - 1
            spec = self._spec(directory)
            if spec is not None:
                layers.append(("/".join(parts[:depth]), spec))
            directory = directory / name
            if not last or is_dir:
                if skip_dir_reason(name, self.config):
                    return Skip.SKIPPED_DIR
                if (directory / VENV_MARKER).exists():
                    return Skip.VIRTUALENV
            if is_ignored(layers, rel, is_dir=not last or is_dir):
                return Skip.IGNORED
            if (not last or is_dir) and dir_excluded(rel, self.exclude):
                return Skip.EXCLUDED
        if os.path.realpath(path) != str(path) and not is_within(Path(os.path.realpath(path)), self.root):
            return Skip.SYMLINK_ESCAPE
        return None if is_dir else config_reason(self.config, "/".join(parts), self.include, self.exclude)
