"""The ``"model": "auto"`` rule: the 1.5B where it is installed and this machine meets the latency aims with it,
otherwise the 0.5B; pure functions over measured figures, each choice with its reason in words.

The aims (issue 43): after a key, the first ghost text p50 at most 0.6 s and the whole first line p50 at most
1.0 s. With the default deadlines a first line is shown once it has ended (``lineDeadlineMs`` ends a first line
only at its end), so both come down to when the median first line ends after the key:

    predicted = tail prefill + LINE_TOKENS x one-token pass

- the tail prefill: the prompt's tokens after the cached prefix that a key makes the model prefill again (the
  daemon prefills the rest in idle time), :data:`TAIL_TOKENS` after a prompt of the CPU's token budget, timed;
- the one-token pass after that prompt, timed (the fastest of a few); decoding is counted at one token a pass,
  as greedy decodes: lookahead's drafts only make a line sooner, so the prediction errs toward the 0.5B;
- :data:`LINE_TOKENS`: the median code line's tokens with its line break, Qwen2.5-Coder's tokenizer (whole
  non-comment lines of seven libraries, 2026-11-26: jinja2 7, click 8, markdown-it 7, attrs 6, anyio 7, h11 8,
  idna 5; the largest taken: a hole's first line is often the rest of a line, shorter).

Both models share the tokenizer, so the 1.5B's figures alone decide. They are measured on this machine at
start-up (``lsp_server/model_figures.py``: timed with the 1.5B loaded, stored beside the kernels like the
pass-cost table, read back by later starts, timed again where they expire: ``model_figures.verdict``). A 1.5B
that fails to load falls back to the 0.5B (:func:`fell_back`).

Downloaded base models (``lookahead-lsp model --get``: ``decoder/weights/base_models.py``) come first: the base
models are the ones trained for infilling, so ``auto`` takes the largest downloaded one this machine carries
(:func:`carried_base`): the 0.5B always (the embedded 0.5B's size), a larger one where its own figures, timed as
the 1.5B Instruct's are, meet the same aims. Where none is carried the rule above picks between the Instruct ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lookahead_lsp.decoder.weights.base_models import BASE_MODELS, BaseModel
from lookahead_lsp.decoder.weights.embedded import EMBEDDED, EMBEDDED_1_5B, MissingPartError, locate_parts

AUTO = "auto"
SMALL = EMBEDDED.spec  # "embedded": Qwen2.5-Coder-0.5B-Instruct, always installed with the daemon
LARGE = EMBEDDED_1_5B.spec  # "embedded-1.5b": Qwen2.5-Coder-1.5B-Instruct, the extra ``model-1.5b``
SIZES = {SMALL: "0.5B", LARGE: "1.5B", **{model.name: model.size for model in BASE_MODELS}}  # the status bar's names

TAIL_TOKENS = 32  # re-prefilled after a key: the 28 of psm-short (benchmarks.md); psm-line's p50 is 1, mean 16
LINE_TOKENS = 8  # the median code line with its line break (module docstring)


@dataclass(frozen=True)
class Aim:
    """A latency aim: the p50 of ``what``, in seconds after the key, at most ``seconds``."""

    what: str
    seconds: float


AIMS = (Aim("first ghost text", 0.6), Aim("whole first line", 1.0))


@dataclass(frozen=True)
class Figures:
    """A model's measured costs on this machine, in seconds."""

    one_token_s: float  # a one-token pass after a prompt of the CPU's token budget
    tail_prefill_s: float  # prefilling :data:`TAIL_TOKENS` after that prompt
    threads: int | None = None  # the torch threads they were timed with

    def predicted_line_s(self) -> float:
        """When the median first line ends after the key (module docstring)."""
        return self.tail_prefill_s + LINE_TOKENS * self.one_token_s

    def describe(self) -> str:
        threads = "" if self.threads is None else f", {self.threads} thread{'s' if self.threads != 1 else ''}"
        return (
            f"one-token pass {self.one_token_s * 1000:.0f} ms, {TAIL_TOKENS}-token tail prefill "
            f"{self.tail_prefill_s * 1000:.0f} ms{threads}: a first line of {LINE_TOKENS} tokens "
            f"{self.predicted_line_s():.2f} s after the key"
        )


@dataclass(frozen=True)
class Choice:
    """The model to load for the ``model`` setting and why (``auto``: the rule's reason; else the setting)."""

    spec: str
    reason: str
    setting: str = AUTO
    figures: Figures | None = None

    def to_json(self) -> dict[str, object]:
        """What ``lookahead.stats`` reports (``model.choice``) and the editors show."""
        return {"setting": self.setting, "model": self.spec, "size": SIZES.get(self.spec), "reason": self.reason}

    def log_line(self) -> str:
        return f"model {self.setting!r}: {self.spec} ({self.reason})"


def missed_aims(figures: Figures, aims: Sequence[Aim] = AIMS) -> list[Aim]:
    """The aims the predicted first line misses."""
    predicted = figures.predicted_line_s()
    return [aim for aim in aims if predicted > aim.seconds]


def decide(not_installed: str | None, figures: Figures | None, aims: Sequence[Aim] = AIMS) -> Choice:
    """The choice for ``auto``: ``not_installed`` says why the 1.5B is not installed (None: it is); ``figures``
    are the 1.5B's on this machine (None: not measured, as where it is not installed)."""
    if not_installed is not None:
        return Choice(SMALL, f"the 1.5B is not installed: {not_installed}")
    if figures is None:
        return Choice(SMALL, "the 1.5B's speed on this machine is unknown")
    missed = missed_aims(figures, aims)
    if missed:
        aim = missed[0]
        why = f"the 1.5B is too slow here: {figures.describe()}, over the {aim.what} aim of {aim.seconds} s"
        return Choice(SMALL, why, figures=figures)
    within = " and ".join(f"{aim.what} {aim.seconds} s" for aim in aims)
    return Choice(LARGE, f"the 1.5B meets the aims here ({within}): {figures.describe()}", figures=figures)


def carried_base(model: BaseModel, figures: Figures | None, aims: Sequence[Aim] = AIMS) -> Choice | None:
    """The downloaded base ``model`` as the choice where this machine carries it (module docstring): the 0.5B
    always, a larger one where ``figures`` (its own, timed here) meet ``aims``; None where it is not carried."""
    if model.size == "0.5B":
        return Choice(model.name, "a downloaded base model (trained for infilling) of the embedded 0.5B's size")
    if figures is None or missed_aims(figures, aims):
        return None
    within = " and ".join(f"{aim.what} {aim.seconds} s" for aim in aims)
    why = f"the largest downloaded base model (trained for infilling) that meets the aims here ({within})"
    return Choice(model.name, f"{why}: {figures.describe()}", figures=figures)


def fell_back(choice: Choice, error: str) -> Choice:
    """The 0.5B in place of a chosen model (the 1.5B, a downloaded base model) that failed to load."""
    chosen = "the 1.5B" if choice.spec == LARGE else choice.spec
    return Choice(SMALL, f"{chosen} was chosen ({choice.reason}) but failed to load: {error}", figures=choice.figures)


def untimed(error: str) -> Choice:
    """The 0.5B where the installed 1.5B failed to load or run while it was being timed here."""
    return Choice(SMALL, f"the 1.5B is installed but failed to load or run while timed here: {error}")


def given(spec: str) -> Choice:
    """The choice of a ``model`` setting that names its model."""
    return Choice(spec, "named by the model setting", setting=spec)


def large_not_installed() -> str | None:
    """Why the 1.5B is not installed (its part wheels do not all locate), or None when it is. Nothing is read
    or assembled: only where its part files are is looked up."""
    try:
        locate_parts(EMBEDDED_1_5B)
    except MissingPartError as exc:
        return str(exc)
    return None
