"""weights: where lookahead-lsp keeps what it builds once per machine: the root of its cache directories.

Converted models (:mod:`decoder.weights.embedded`), packed weights (:mod:`decoder.runtime.packed_model`) and the
native kernels' builds (:mod:`decoder.kernels.woq_native`) each live in their own versioned folder under it.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

CACHE_ENV = "LOOKAHEAD_LSP_CACHE"

log = logging.getLogger(__name__)


def cache_root() -> Path:
    """The root of lookahead-lsp's caches: ``$LOOKAHEAD_LSP_CACHE`` or the user cache directory."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("lookahead-lsp"))


def write_json(path: Path, data: Any, what: str) -> None:
    """Write ``data`` as JSON to ``path``, whole or not at all (a temporary file beside it, renamed); a failure is
    logged as about ``what``, never raised (what is stored beside the kernels is only an optimisation)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.stem}-", delete=False) as handle:
            json.dump(data, handle)
        os.replace(handle.name, path)
    except OSError as exc:
        log.warning("cannot write %s %s: %s", what, path, exc)
