"""weights: where lookahead-lsp keeps what it builds once per machine: the root of its cache directories.

Converted models (:mod:`decoder.weights.embedded`), packed weights (:mod:`decoder.runtime.packed_model`) and the
native kernels' builds (:mod:`decoder.kernels.woq_native`) each live in their own versioned folder under it.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "LOOKAHEAD_LSP_CACHE"


def cache_root() -> Path:
    """The root of lookahead-lsp's caches: ``$LOOKAHEAD_LSP_CACHE`` or the user cache directory."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("lookahead-lsp"))
