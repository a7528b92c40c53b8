"""Strict types for the params fields that lsprotocol's converter would coerce instead of refusing.

cattrs structures an LSP ``uinteger`` with ``int(value)``, so ``"line": "1"``, ``1.5`` and ``true`` would
all pass as positions. :func:`position_problem` tells, for a request that takes a position, which field is
not an integer in the LSP's range (``bool`` excluded: it is an ``int`` in Python); the protocol answers it
with -32602 and that text. Pure functions, no I/O.
"""

from __future__ import annotations

import json
from typing import Any

POSITION_METHODS = frozenset({"textDocument/inlineCompletion", "textDocument/completion"})
"""The requests this server serves whose params hold a ``position``."""
UINTEGER_MAX = 2**31 - 1  # LSP's uinteger


def is_uinteger(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= UINTEGER_MAX


def position_problem(method: Any, params: Any) -> str | None:
    """Why ``params.position`` of a ``method`` request is ill-typed (naming the field), or None.

    A missing position or field, or params that are no object, are left to the converter, which names them.
    """
    if method not in POSITION_METHODS or not isinstance(params, dict):
        return None
    position = params.get("position")
    if not isinstance(position, dict):
        return None
    for field in ("line", "character"):
        if field in position and not is_uinteger(position[field]):
            shown = json.dumps(position[field])[:40]
            return f"position.{field} must be an integer from 0 to {UINTEGER_MAX}, got {shown}"
    return None
