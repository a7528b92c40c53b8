"""runtime: which model prefills for a loaded model: the same weights in a cheaper precision, or the model itself.

:func:`decoder.runtime.model.load_model` sets it once a model is loaded; :func:`decoder.forward.prefill` asks.
"""

from __future__ import annotations

import weakref

import torch

_PREFILL_MODELS: weakref.WeakKeyDictionary[torch.nn.Module, torch.nn.Module] = weakref.WeakKeyDictionary()


def use_prefill_model(model: torch.nn.Module, fast: torch.nn.Module | None) -> None:
    """Prefill for ``model`` with ``fast`` (the same weights in a cheaper precision; None: ``model`` itself).

    On a CPU with bfloat16 instructions a bfloat16 prefill is about 3x faster than float32, while decoding
    (one to a few tokens a pass, bound by memory) gains little and keeps float32, so that a multi-token
    lookahead pass picks exactly the tokens one-token greedy passes pick. Greedy and lookahead share the
    prefill, so they still agree token for token."""
    if fast is None:
        _PREFILL_MODELS.pop(model, None)
    else:
        _PREFILL_MODELS[model] = fast


def prefill_model(model: torch.nn.Module) -> torch.nn.Module:
    """The model that prefills for ``model`` (itself unless :func:`use_prefill_model` said otherwise)."""
    return _PREFILL_MODELS.get(model, model)
