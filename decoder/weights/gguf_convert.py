"""weights: a GGUF file as a plain transformers directory, written tensor by tensor (never the float model in memory).

transformers can load a GGUF itself, but it dequantizes every tensor into one float state dict first: about
2.5 GB for the 0.5B model in float32, 6 GB for the 1.5B. Here only the config and the tokenizer come from
transformers (from the GGUF's metadata); the weights are dequantized with the ``gguf`` package (the function
transformers uses, so the values are the same) a slice of rows at a time and streamed into one
``model.safetensors``, whose header is known before any data is written. Quantized matrices are stored in the
``matrix_dtype`` asked for (float32, or bfloat16 to halve the file); float32 tensors (norms, biases) stay float32.
With ``matrices=False`` only the vectors (norms, biases) are written, a few hundred kilobytes, and the header's
metadata lists every tensor's name and shape (:data:`INDEX_KEY`): what a model on the GGUF's own codes reads.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lookahead_lsp.decoder.weights.gguf_file import read_gguf
from lookahead_lsp.decoder.weights.gguf_names import tensor_name

logger = logging.getLogger(__name__)

SAFETENSORS_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16"}
_SLICE_BYTES = 32 * 1024 * 1024  # float32 bytes dequantized at a time
INDEX_KEY = "lookahead-tensors"
"""The metadata entry of a vectors-only file: JSON ``{name: shape}`` of every tensor of the GGUF."""


def write_config_and_tokenizer(gguf_path: Path, out_dir: Path) -> Any:
    """The transformers config (without a quantization config, with its architecture) and tokenizer of a GGUF,
    saved into ``out_dir``; returns the config.

    transformers reads a qwen2 GGUF's config with gguf's reader, which builds a numpy view for each of the
    tokenizer's 300,000 strings (36 s for the 1.5B on a 2-core EPYC), and reads it once more inside
    ``AutoTokenizer`` for the tokenizer's class. Here the config comes from the metadata read fast
    (:func:`gguf_config`, the same values) and the tokenizer's class from the config's model type."""
    from transformers import AutoConfig, AutoTokenizer
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    fields = gguf_config(gguf_path)
    if fields is None:
        config = AutoConfig.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    else:
        config = AutoConfig.for_model(**fields)
    config = copy.deepcopy(config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.architectures = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[config.model_type]]
    config.dtype = torch.float32
    tokenizer = AutoTokenizer.from_pretrained(
        str(gguf_path.parent), gguf_file=gguf_path.name, tokenizer_type=config.model_type
    )
    config.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    return config


FAST_CONFIG_ARCHITECTURES = frozenset({"qwen2"})
"""Architectures whose transformers config is its GGUF metadata renamed (transformers' GGUF loading has no
special case for them); others go through ``AutoConfig``."""


def gguf_config(gguf_path: Path) -> dict[str, Any] | None:
    """The transformers config fields of a GGUF of a :data:`FAST_CONFIG_ARCHITECTURES` architecture, as
    transformers' ``load_gguf_checkpoint`` makes them (its renaming table, its defaults, tied embeddings where
    there is no ``output.weight``, the vocabulary's size where the metadata lacks one), the metadata read fast
    (:mod:`decoder.weights.gguf_file`); None for another architecture."""
    from transformers.integrations.ggml import GGUF_CONFIG_DEFAULTS_MAPPING, GGUF_CONFIG_MAPPING

    gguf = read_gguf(gguf_path)
    metadata, tensor_names = gguf.metadata, {tensor.name for tensor in gguf.tensors}
    architecture = metadata.get("general.architecture")
    if architecture not in FAST_CONFIG_ARCHITECTURES:
        return None
    fields: dict[str, Any] = {"tie_word_embeddings": "output.weight" not in tensor_names}
    fields |= GGUF_CONFIG_DEFAULTS_MAPPING.get(architecture, {})  # transformers' defaults for GGUF files
    renames: dict[str, Any] = GGUF_CONFIG_MAPPING
    for key, value in metadata.items():
        prefix, _, rest = key.partition(".")
        renamed = renames.get(prefix, {}).get(rest)
        if renamed is not None and renamed != -1:
            fields[renamed] = value
    if "vocab_size" not in fields and isinstance(metadata.get("tokenizer.ggml.tokens"), int):
        fields["vocab_size"] = metadata["tokenizer.ggml.tokens"]  # a string array's value is its length
    return fields


def write_weights(
    gguf_path: Path,
    out_file: Path,
    matrix_dtype: torch.dtype = torch.float32,
    progress: Callable[[float], None] | None = None,
    *,
    matrices: bool = True,
) -> dict[str, tuple[str, list[int]]]:
    """Stream every qwen2 tensor of a GGUF (``matrices=False``: every vector) into a safetensors file; returns
    ``{name: (dtype, shape)}`` of what was written.

    GGUF tensors without a transformers name are skipped (logged)."""
    from gguf import GGMLQuantizationType

    plan: list[tuple[str, Any, torch.dtype]] = []
    index: dict[str, list[int]] = {}
    for tensor in read_gguf(gguf_path).tensors:
        name = tensor_name(tensor.name)
        if name is None:
            logger.warning("GGUF tensor %s has no transformers name; not converted", tensor.name)
            continue
        index[name] = [int(n) for n in reversed(tensor.shape)]
        if matrices or len(tensor.shape) < 2:
            exact = tensor.tensor_type == GGMLQuantizationType.F32 or not matrices  # vectors alone: float32
            plan.append((name, tensor, torch.float32 if exact else matrix_dtype))
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    if not matrices:
        header["__metadata__"][INDEX_KEY] = json.dumps(index, separators=(",", ":"))
    offset = 0
    for name, tensor, dtype in plan:
        shape = [int(n) for n in reversed(tensor.shape)]  # GGUF lists dimensions innermost first
        size = int(np.prod(shape)) * dtype.itemsize
        header[name] = {"dtype": SAFETENSORS_DTYPES[dtype], "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    written = 0
    with open(out_file, "wb") as out:
        out.write(len(encoded).to_bytes(8, "little") + encoded)
        for _name, tensor, dtype in plan:
            for values in _dequantized_slices(tensor):
                if dtype == torch.float32:
                    out.write(values.tobytes())
                else:  # a dequantized copy (writable): through torch for the rounding to bfloat16
                    out.write(torch.from_numpy(values).to(dtype).view(torch.uint8).numpy().tobytes())
                written += values.size * dtype.itemsize
                if progress is not None:
                    progress(written / max(offset, 1))
    return {name: (header[name]["dtype"], header[name]["shape"]) for name, _t, _d in plan}


def _dequantized_slices(tensor: Any) -> Any:
    """A GGUF tensor's float32 values as contiguous 2-D slices of whole rows (1-D tensors in one piece)."""
    from gguf.quants import dequantize

    data = tensor.data
    if data.ndim < 2:
        yield np.ascontiguousarray(dequantize(data, tensor.tensor_type), dtype=np.float32)
        return
    cols = int(tensor.shape[0])
    step = max(1, _SLICE_BYTES // (4 * cols))
    for start in range(0, data.shape[0], step):
        block = dequantize(data[start : start + step], tensor.tensor_type)
        yield np.ascontiguousarray(block.reshape(-1, cols), dtype=np.float32)
