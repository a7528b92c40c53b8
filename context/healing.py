"""Token healing: end the prompt on a token boundary before the cursor and make the model re-type the rest.

A cursor inside a token (``stdout=subpr|``) leaves the prompt ending on a token the model rarely saw there
(``=sub`` + ``pr``): it then struggles to continue the word. Healing removes the last tokens from the prompt's
prefix and constrains the first generated tokens to agree with the removed characters, so the model picks the
natural tokenization (``=`` + ``subprocess``) itself; :func:`strip_healed` drops the re-typed characters again.

What is removed (decided here, at most :data:`MAX_TOKENS` tokens and :data:`MAX_CHARS` characters):
- nothing when the last token holds a line break: a line start is a natural boundary;
- of a last token of spaces or tabs, what the tokenizer would join to the next word: the indentation of a
  blank line (``ĠĠĠĠĠĠĠĠ``) is never followed by a word in training text (that is ``ĠĠĠĠĠĠĠ`` + ``Ġreturn``),
  so the prompt keeps ``ĠĠĠĠĠĠĠ`` and the model re-types the last ``Ġ`` with its word; backing up to the line
  break instead leaves the model to choose how to split the indentation, and it can choose a split it never
  saw and lose its way (``ĠĠĠ`` then single spaces to the token limit);
- the last token otherwise;
- and the token before it when the two split a word (``=sub`` + ``pr``), or when the last token alone is not
  valid UTF-8 (a character split across tokens).

Token texts are compared as bytes (byte-level BPE tokens can hold part of a character). A
:class:`VocabIndex` per tokenizer keeps the vocabulary's token bytes sorted, so the tokens compatible with the
removed text are a binary-searched range plus a few exact look-ups.
"""

from __future__ import annotations

import bisect
import functools
import weakref
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_TOKENS = 2
MAX_CHARS = 16
TAIL_CHARS = 512  # text healing tokenizes only this much of the prefix's last line
_BLANKS = (b" ", b"\t")
PROBE = "x"  # a word after trailing whitespace: how the tokenizer splits that whitespace before code
EXCLUDING_KEPT = 64  # VocabIndex.excluding answers kept


@functools.cache
def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, inverted: the printable stand-in character -> the byte it encodes."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def _token_bytes(token: str, table: dict[str, int]) -> bytes | None:
    try:
        return bytes(table[c] for c in token)
    except KeyError:
        return None


def _successor(key: bytes) -> bytes:
    """The smallest byte string greater than every string that starts with ``key`` (``key`` not all 0xff)."""
    stem = key.rstrip(b"\xff")
    return stem[:-1] + bytes([stem[-1] + 1])


class VocabIndex:
    """A tokenizer's vocabulary as bytes: each id's bytes, and the ids sorted by their bytes.

    Held compactly (Qwen2's 151k tokens in about 2 MB, not the 40 MB of a list, a sorted list and a dict of
    Python objects): all tokens' bytes in one string with each id's offset, and the non-empty ids in byte
    order; a search bisects the ids by their bytes."""

    def __init__(self, token_bytes: Sequence[bytes]) -> None:
        self._blob = b"".join(token_bytes)
        self._offsets = array("i", [0])
        for token in token_bytes:
            self._offsets.append(self._offsets[-1] + len(token))
        present = (i for i, token in enumerate(token_bytes) if token)
        self._ids = array("i", sorted(present, key=self.token_bytes))  # stable: equal bytes by id
        self._compatible_cache: dict[bytes, tuple[int, ...]] = {}
        self._word_cache: dict[bytes, tuple[int, ...]] = {}  # word_after's answers: whitespace, a few keys
        self._excluding_cache: dict[tuple[int, int], tuple[Sequence[int] | None, frozenset[int], tuple[int, ...]]] = {}

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> VocabIndex:
        """Built from a byte-level BPE tokenizer (Qwen2's); added and special tokens are left out (empty)."""
        table = _byte_decoder()
        vocab: dict[str, int] = tokenizer.get_vocab()
        added = set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
        out = [b""] * (max(vocab.values()) + 1)
        for token, index in vocab.items():
            if index not in added:
                out[index] = _token_bytes(token, table) or b""
        return cls(out)

    def token_bytes(self, token_id: int) -> bytes:
        if not 0 <= token_id < len(self._offsets) - 1:
            return b""
        return self._blob[self._offsets[token_id] : self._offsets[token_id + 1]]

    def compatible(self, remaining: bytes) -> tuple[int, ...]:
        """Ids whose bytes start with ``remaining`` or are a non-empty prefix of it (sorted, cached)."""
        cached = self._compatible_cache.get(remaining)
        if cached is not None:
            return cached
        ids, key = self._ids, self.token_bytes
        low = bisect.bisect_left(ids, remaining, key=key)
        high = bisect.bisect_left(ids, _successor(remaining), key=key) if remaining.strip(b"\xff") else len(ids)
        found = set(ids[low:high])
        for length in range(1, len(remaining)):  # the tokens that are exactly a shorter prefix
            prefix = remaining[:length]
            found.update(ids[bisect.bisect_left(ids, prefix, key=key) : bisect.bisect_right(ids, prefix, key=key)])
        result = tuple(sorted(found))
        if len(self._compatible_cache) > 4096:
            self._compatible_cache.clear()
        self._compatible_cache[remaining] = result
        return result

    def word_after(self, remaining: bytes) -> tuple[int, ...]:
        """:meth:`compatible` ids that, where they go past ``remaining``, go on with no more spaces or tabs: the
        tokens that end a run of whitespace the way the tokenizer ends it, joined to the next word (cached)."""
        cached = self._word_cache.get(remaining)
        if cached is None:
            width = len(remaining)
            compatible = self.compatible(remaining)
            cached = tuple(i for i in compatible if self.token_bytes(i)[width : width + 1] not in _BLANKS)
            self._word_cache[remaining] = cached
        return cached

    @property
    def size(self) -> int:
        """Ids in the vocabulary (special tokens included)."""
        return len(self._offsets) - 1

    def excluding(self, ids: Sequence[int] | None, banned: frozenset[int]) -> tuple[int, ...]:
        """``ids`` (None: every id) without ``banned``; kept per pair of objects (the sequences this index hands
        out are cached, so a constraint's answer is the same object step after step and request after request)."""
        key = (id(ids), id(banned))
        kept = self._excluding_cache.get(key)
        if kept is None or kept[0] is not ids or kept[1] is not banned:
            kept = (ids, banned, tuple(i for i in (range(self.size) if ids is None else ids) if i not in banned))
            if len(self._excluding_cache) > EXCLUDING_KEPT:
                self._excluding_cache.clear()
            self._excluding_cache[key] = kept
        return kept[2]

    def closers_line_end(self, blank_allowed: bool) -> frozenset[int]:
        """Ids that end a line holding only closing brackets (``Ġ}\n``, ``);\n``; with ``blank_allowed`` False,
        also the ones that end it with nothing more: ``\n``, ``Ġ\n``)."""
        return self._line_ends[blank_allowed]

    @functools.cached_property
    def _line_ends(self) -> dict[bool, frozenset[int]]:
        closers_only: set[int] = set()
        bare: set[int] = set()
        for i in self._ids:
            head, newline, _ = self.token_bytes(i).partition(b"\n")
            code = head.strip(b" \t\r")
            if newline and not code.strip(b")]};,"):
                (closers_only if code else bare).add(i)
        return {True: frozenset(closers_only), False: frozenset(closers_only | bare)}

    @functools.cached_property
    def not_blank(self) -> tuple[int, ...]:
        """Ids whose bytes start with neither a space nor a tab (the word after a run of whitespace)."""
        return tuple(i for i in self._ids if self.token_bytes(i)[:1] not in _BLANKS)


_INDEXES: weakref.WeakKeyDictionary[Any, VocabIndex] = weakref.WeakKeyDictionary()


def vocab_index(tokenizer: Any) -> VocabIndex:
    """The :class:`VocabIndex` of ``tokenizer``, built once per tokenizer object."""
    index = _INDEXES.get(tokenizer)
    if index is None:
        index = VocabIndex.from_tokenizer(tokenizer)
        _INDEXES[tokenizer] = index
    return index


@dataclass(frozen=True)
class Healing:
    """The prefix backed up to a token boundary: ``removed_text`` is what the model has to re-type."""

    removed_text: str = ""
    kept_ids: tuple[int, ...] | None = None  # when healing token ids
    kept_text: str | None = None  # when healing text
    word_follows: bool = False  # whitespace the tokenizer joins to a word: no more whitespace may follow it

    @property
    def healed(self) -> bool:
        return bool(self.removed_text)


def is_word_char(char: str) -> bool:
    """A letter, digit or underscore: part of an identifier or number."""
    return char.isalnum() or char == "_"


def _removal(token_texts: Sequence[bytes]) -> int:
    """How many trailing tokens to remove (0 to :data:`MAX_TOKENS`), given the bytes of the last tokens."""
    if not token_texts:
        return 0
    count = 0
    removed = b""
    for raw in reversed(token_texts[-MAX_TOKENS:]):
        if not raw or b"\n" in raw or b"\r" in raw or len((raw + removed).decode("utf-8", "replace")) > MAX_CHARS:
            break
        candidate = raw + removed
        if count == 1:
            try:
                last_text = removed.decode("utf-8")
            except UnicodeDecodeError:
                last_text = ""
            prev_text = raw.decode("utf-8", "replace")
            splits_word = bool(last_text) and is_word_char(last_text[0]) and is_word_char(prev_text[-1])
            if last_text and not splits_word:
                break
        count, removed = count + 1, candidate
    try:
        removed.decode("utf-8")
    except UnicodeDecodeError:
        return 0
    return count


def _whitespace_split(tokenizer: Any, vocab: VocabIndex, prefix_ids: Sequence[int]) -> Healing | None:
    """A prefix ending in a token of spaces or tabs (the indentation typed on a new line, a space after ``=``),
    split as the tokenizer splits that whitespace before a word: the indentation ``ĠĠĠĠĠĠĠĠ`` becomes
    ``ĠĠĠĠĠĠĠ`` kept in the prompt and ``Ġ`` for the model to re-type with its word (``Ġif``), the split the
    model saw in training. None when the last token is not horizontal whitespace."""
    last = vocab.token_bytes(prefix_ids[-1]) if prefix_ids else b""
    if not last or last.strip(b" \t"):
        return None
    probe = tokenizer.encode(last.decode("ascii") + PROBE, add_special_tokens=False)
    kept: list[int] = []
    covered = 0
    for token in probe:
        width = len(vocab.token_bytes(token))
        if covered + width > len(last):
            break
        kept.append(token)
        covered += width
    removed = last[covered:].decode("ascii")
    return Healing(removed_text=removed, kept_ids=(*prefix_ids[:-1], *kept), word_follows=bool(removed))


def heal_ids(tokenizer: Any, prefix_ids: Sequence[int]) -> Healing:
    """Heal a tokenized prefix: drop its last tokens per the rules above."""
    vocab = vocab_index(tokenizer)
    split = _whitespace_split(tokenizer, vocab, prefix_ids)
    if split is not None:
        return split
    tail = [vocab.token_bytes(i) for i in prefix_ids[-MAX_TOKENS:]]
    count = _removal(tail)
    if count == 0:
        return Healing(kept_ids=tuple(prefix_ids))
    removed = b"".join(tail[len(tail) - count :]).decode("utf-8")
    return Healing(removed_text=removed, kept_ids=tuple(prefix_ids[: len(prefix_ids) - count]))


def heal_text(tokenizer: Any, prefix: str) -> Healing:
    """Heal a prefix given as text (only the tail of its last line is tokenized)."""
    start = max(prefix.rfind("\n") + 1, len(prefix) - TAIL_CHARS)
    tail_ids = tokenizer.encode(prefix[start:], add_special_tokens=False, split_special_tokens=True)
    removed = heal_ids(tokenizer, tail_ids).removed_text
    return Healing(removed_text=removed, kept_text=prefix[: len(prefix) - len(removed)])


def heal(tokenizer: Any, prefix: str | Sequence[int]) -> Healing:
    """:func:`heal_text` for a string, :func:`heal_ids` for token ids."""
    return heal_text(tokenizer, prefix) if isinstance(prefix, str) else heal_ids(tokenizer, prefix)


@dataclass
class HealingConstraint:
    """A :class:`~decoder.types.TokenConstraint`: the first tokens must re-type ``removed_text``; with
    ``word_follows`` (removed whitespace) as the tokenizer splits it before a word: no token that adds more
    spaces or tabs to it (that split would have kept a longer run of whitespace in the prompt)."""

    vocab: VocabIndex
    removed_text: str
    word_follows: bool = False
    _target: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._target = self.removed_text.encode("utf-8")

    def allowed(self, generated: Sequence[int]) -> Sequence[int] | None:
        covered = 0
        for k, token in enumerate(generated):
            covered += len(self.vocab.token_bytes(token))
            if covered >= len(self._target):
                ends_run = covered == len(self._target) and k == len(generated) - 1
                return self.vocab.not_blank if self.word_follows and ends_run else None
        if covered >= len(self._target):
            return None
        remaining = self._target[covered:]
        return self.vocab.word_after(remaining) if self.word_follows else self.vocab.compatible(remaining)


def healing_constraint(tokenizer: Any, healing: Healing) -> HealingConstraint | None:
    """The constraint for ``healing``, or ``None`` when nothing was removed."""
    if not healing.healed:
        return None
    return HealingConstraint(vocab_index(tokenizer), healing.removed_text, healing.word_follows)


def strip_healed(completion: str, removed_text: str) -> str:
    """The completion from the cursor on: without the re-typed ``removed_text``.

    A completion that does not start with it (shorter, or diverging before the cursor) has nothing to insert.
    """
    if completion.startswith(removed_text):
        return completion[len(removed_text) :]
    return ""
