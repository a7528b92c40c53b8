"""weights: download one file from the Hugging Face hub with plain urllib: resumable, checked against the hub's
sha256, with progress lines. Only ``lookahead-lsp model --get`` calls it: the daemon never downloads.

- The hub: ``$HF_ENDPOINT`` (default ``https://huggingface.co``). A file's sha256 and size come from the
  repository's tree (``GET /api/models/{repo}/tree/{revision}``: an LFS file's ``lfs.oid`` is its sha256,
  ``lfs.size`` its size); its bytes from ``/{repo}/resolve/{revision}/{file}`` (redirects followed).
  ``HF_HUB_OFFLINE`` does not stop it: the project's scripts set that for transformers on every run, and a
  download here is always one the user asked for.
- Resumable: the bytes go to ``<file>.part``; a request for a file already partly there asks for the rest
  (``Range: bytes=N-``; a server that answers 200 instead of 206 sends it whole, and the part starts over). A
  connection lost mid-file is resumed the same way, up to :data:`ATTEMPTS` times a run; a run that gives up
  leaves the part for the next run to resume.
- Checked: once the part holds the hub's size, its sha256 must be the hub's, else the part is removed and the
  download fails (nothing is kept as complete); a match is renamed into place, its sha256 written beside it
  (``<file>.sha256``).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_ENDPOINT = "https://huggingface.co"
ATTEMPTS = 4  # connections a run opens for one file before it gives up (the part stays for the next run)
CHUNK = 1 << 20
TIMEOUT_S = 60.0

Say = Callable[[str], None]


class DownloadError(Exception):
    """A download that could not finish or whose bytes are not the hub's; the message says why in one line."""


@dataclass(frozen=True)
class HubFile:
    """A file in a hub repository: where to get it and what it must be."""

    url: str
    sha256: str
    size: int


def hub_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def tree_url(endpoint: str, repo: str, revision: str = "main") -> str:
    return f"{endpoint}/api/models/{repo}/tree/{urllib.parse.quote(revision, safe='')}"


def file_url(endpoint: str, repo: str, filename: str, revision: str = "main") -> str:
    return f"{endpoint}/{repo}/resolve/{urllib.parse.quote(revision, safe='')}/{urllib.parse.quote(filename)}"


def lfs_entry(tree: Any, filename: str) -> tuple[str, int]:
    """The (sha256, size) of ``filename`` in a hub tree listing; DownloadError where it is missing or not LFS."""
    if not isinstance(tree, list):
        raise DownloadError("the hub's tree listing is not a list")
    for entry in tree:
        if isinstance(entry, dict) and entry.get("path") == filename:
            lfs = entry.get("lfs")
            if not isinstance(lfs, dict) or not isinstance(lfs.get("oid"), str) or not isinstance(lfs.get("size"), int):
                raise DownloadError(f"{filename} is not an LFS file on the hub: no sha256 to check it against")
            return lfs["oid"].lower(), int(lfs["size"])
    names = [str(entry.get("path")) for entry in tree if isinstance(entry, dict)]
    raise DownloadError(f"{filename} is not in the repository (it holds: {', '.join(names) or 'nothing'})")


def hub_file(repo: str, filename: str, endpoint: str | None = None, revision: str = "main") -> HubFile:
    """Where ``filename`` of ``repo`` is and its sha256 and size, from the hub's tree listing."""
    base = endpoint or hub_endpoint()
    url = tree_url(base, repo, revision)
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            tree = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise DownloadError(f"the hub answered {exc.code} for {url}") from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise DownloadError(f"cannot read {url}: {exc}") from exc
    sha256, size = lfs_entry(tree, filename)
    return HubFile(file_url(base, repo, filename, revision), sha256, size)


def part_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part")


class ProgressLines:
    """Progress of one file as lines: one per :data:`STEP` of it and at least every :data:`EVERY_S` seconds (and one
    each time the bytes resume), so that a slow download never looks like a hang."""

    STEP = 0.1
    EVERY_S = 10.0

    def __init__(self, what: str, size: int, say: Say) -> None:
        self.what, self.size, self.say = what, size, say
        self.started = self.last = time.monotonic()
        self.next = 0.0

    def line(self, done: int) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        fraction = done / self.size if self.size else 1.0
        return (
            f"{self.what}: {done / 1e6:,.1f} of {self.size / 1e6:,.1f} MB ({fraction:.0%}), "
            f"{done / 1e6 / elapsed:.1f} MB/s"
        )

    def update(self, done: int) -> None:
        fraction = done / self.size if self.size else 1.0
        now = time.monotonic()
        if fraction >= self.next or now - self.last >= self.EVERY_S:
            self.say(self.line(done))
            self.next = (int(fraction / self.STEP) + 1) * self.STEP
            self.last = now


def _receive(url: str, part: Path, size: int, lines: ProgressLines) -> None:
    """One connection: the bytes of ``url`` after those ``part`` holds, appended (or all of them, written anew,
    where the server ignores the range). Raises OSError (or http.client's errors) where the connection breaks."""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url)
    if have:
        request.add_header("Range", f"bytes={have}-")
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        if have and response.status != 206:
            lines.say(f"{lines.what}: the server sent the whole file, not the rest: starting over")
            have = 0
        with part.open("ab" if have else "wb") as out:
            done = have
            while done < size:
                chunk = response.read(min(CHUNK, size - done))
                if not chunk:
                    raise http.client.IncompleteRead(b"", size - done)
                out.write(chunk)
                done += len(chunk)
                lines.update(done)


def receive(url: str, part: Path, size: int, lines: ProgressLines, attempts: int = ATTEMPTS) -> None:
    """``part`` filled to ``size`` bytes from ``url``, resuming where it stands (a previous run's bytes, a lost
    connection), at most ``attempts`` connections; DownloadError where it cannot (the part stays, to resume)."""
    for attempt in range(1, attempts + 1):
        have = part.stat().st_size if part.exists() else 0
        if have > size:
            part.unlink()  # not this file's bytes: they cannot be its start
            have = 0
        if have == size:
            return
        if have:
            lines.say(f"{lines.what}: resuming at {have / 1e6:,.1f} MB")
        try:
            _receive(url, part, size, lines)
            return
        except urllib.error.HTTPError as exc:
            raise DownloadError(f"the hub answered {exc.code} for {url}") from exc
        except (OSError, http.client.HTTPException) as exc:
            if attempt == attempts:
                raise DownloadError(
                    f"the connection broke {attempts} times ({type(exc).__name__}: {exc}); "
                    f"run the command again to resume from {part}"
                ) from exc
            lines.say(f"{lines.what}: connection lost ({type(exc).__name__}); trying again")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK * 8):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(repo: str, filename: str, dest: Path, say: Say, endpoint: str | None = None) -> str:
    """``filename`` of hub repository ``repo`` at ``dest``, checked; returns its sha256. Quick where ``dest`` is
    already there with the hub's sha256 beside it."""
    wanted = hub_file(repo, filename, endpoint)
    sidecar = dest.with_name(dest.name + ".sha256")
    if dest.is_file() and sidecar.is_file() and sidecar.read_text(encoding="utf-8").strip() == wanted.sha256:
        say(f"{filename}: already downloaded ({dest})")
        return wanted.sha256
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(dest)
    receive(wanted.url, part, wanted.size, ProgressLines(filename, wanted.size, say))
    say(f"{filename}: checking its sha256")
    got = file_sha256(part)
    if got != wanted.sha256:
        part.unlink()
        raise DownloadError(
            f"{filename}'s sha256 is {got}, the hub's is {wanted.sha256}: the download was removed, not kept"
        )
    sidecar.unlink(missing_ok=True)  # the file and its sha256 change together: no moment with an old sidecar
    os.replace(part, dest)
    sidecar.write_text(wanted.sha256 + "\n", encoding="utf-8")
    say(f"{filename}: {wanted.size / 1e6:,.1f} MB, sha256 checked, at {dest}")
    return wanted.sha256
