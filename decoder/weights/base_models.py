"""weights: the Qwen2.5-Coder **base** GGUFs one can download (``lookahead-lsp model --get NAME``): their names,
where they are on the Hugging Face hub and where a downloaded one lives in the cache.

The files are ggml-org's Q8_0 conversions, the ones llama.vim and llama.vscode download:
``ggml-org/Qwen2.5-Coder-{0.5B,1.5B,3B,7B}-Q8_0-GGUF``, each holding one ``qwen2.5-coder-{size}-q8_0.gguf``
(the 1.5B, 3B and 7B names as llama.cpp's own presets spell them; the 0.5B's by the same pattern). A model is
named by its setting name (``qwen2.5-coder-1.5b-base``) or its hub repository id. Nothing here touches the
network: :mod:`decoder.weights.hub_download` fetches, and only when asked.

A downloaded model is installed once its file is at :func:`installed_path` (the download renames it there only
after its sha256 matched the hub's), with the verified sha256 beside it (``.sha256``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lookahead_lsp.decoder.weights.cache import cache_root

FOLDER = "base-models-v1"


@dataclass(frozen=True)
class BaseModel:
    """One downloadable base GGUF."""

    size: str  # "1.5B"
    approx_bytes: int  # the file's size, roughly (the hub's own figure is what the download checks)

    @property
    def name(self) -> str:
        """The ``model`` setting that names it: ``qwen2.5-coder-1.5b-base``."""
        return f"qwen2.5-coder-{self.size.lower()}-base"

    @property
    def repo(self) -> str:
        """Its Hugging Face hub repository."""
        return f"ggml-org/Qwen2.5-Coder-{self.size}-Q8_0-GGUF"

    @property
    def filename(self) -> str:
        """The GGUF file in :attr:`repo`."""
        return f"qwen2.5-coder-{self.size.lower()}-q8_0.gguf"

    @property
    def parameters_b(self) -> float:
        """Billions of parameters, for ordering by size."""
        return float(self.size.removesuffix("B"))

    def describe(self) -> str:
        return f"{self.name} ({self.repo}, {self.approx_bytes / 1e9:.1f} GB)"


BASE_MODELS = (
    BaseModel("0.5B", 531_000_000),
    BaseModel("1.5B", 1_650_000_000),
    BaseModel("3B", 3_290_000_000),
    BaseModel("7B", 8_100_000_000),
)
"""Smallest first."""


def find_base(spec: str) -> BaseModel | None:
    """The base model ``spec`` names (setting name or hub repo id, any case); None where it names none."""
    wanted = spec.strip().lower()
    for model in BASE_MODELS:
        if wanted in (model.name, model.repo.lower()):
            return model
    return None


def base_folder(root: Path | None = None) -> Path:
    return (root or cache_root()) / FOLDER


def installed_path(model: BaseModel, root: Path | None = None) -> Path:
    """Where ``model``'s verified GGUF lives once downloaded."""
    return base_folder(root) / model.filename


def installed_sha256(model: BaseModel, root: Path | None = None) -> str | None:
    """The verified sha256 of ``model``'s downloaded file; None where it is not (wholly) downloaded."""
    path = installed_path(model, root)
    try:
        sha = path.with_name(path.name + ".sha256").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return sha if path.is_file() and len(sha) == 64 else None


def installed_bases(root: Path | None = None) -> list[BaseModel]:
    """The downloaded base models, smallest first."""
    return [model for model in BASE_MODELS if installed_sha256(model, root) is not None]


def not_downloaded_message(model: BaseModel) -> str:
    """What a setting naming a base model that is not downloaded says (the daemon never downloads on its own)."""
    return (
        f"{model.name} is not downloaded: run `lookahead-lsp model --get {model.name}` "
        f"(about {model.approx_bytes / 1e9:.1f} GB from {model.repo})"
    )


def known_names(embedded: tuple[str, ...] = ("auto", "embedded", "embedded-1.5b")) -> str:
    """Every model name the ``model`` setting knows, for an error message."""
    return ", ".join([*embedded, *(model.name for model in BASE_MODELS)])
