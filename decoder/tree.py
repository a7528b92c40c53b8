"""decoder: the verification branch as a token tree: candidates merged by shared prefixes, flattened for one pass.

Node 0 is the current token (the root). Every other node is a draft token whose parent is the token before
it. The flattened order is depth-first with the most probable child first, so the likeliest path is a
contiguous run and keeping its KV entries is a plain crop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch


@dataclass
class TokenTree:
    tokens: list[int] = field(default_factory=list)  # flattened, root first
    parents: list[int] = field(default_factory=list)  # parent index per node (-1 for the root)
    depths: list[int] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # source of the draft that contributed each node

    def __len__(self) -> int:
        return len(self.tokens)

    def children(self) -> list[dict[int, int]]:
        """Per node: token -> child index."""
        kids: list[dict[int, int]] = [{} for _ in self.tokens]
        for i, parent in enumerate(self.parents):
            if parent >= 0:
                kids[parent][self.tokens[i]] = i
        return kids

    def attention(self) -> torch.Tensor:
        """(n, n) booleans: node i sees node j when j is i or an ancestor of i."""
        n = len(self.tokens)
        mask = torch.zeros((n, n), dtype=torch.bool)
        for i in range(n):
            j = i
            while j >= 0:
                mask[i, j] = True
                j = self.parents[j]
        return mask

    def is_chain(self) -> bool:
        return all(p == i - 1 for i, p in enumerate(self.parents))


def build_tree(root: int, paths: Sequence[tuple[Sequence[int], str, Sequence[float]]]) -> TokenTree:
    """Merge ``(tokens, source, probability per token)`` paths under ``root``; probabilities order siblings."""
    trie: dict[tuple[int, ...], tuple[float, str]] = {}
    for tokens, source, probs in paths:
        for d in range(1, len(tokens) + 1):
            key = tuple(tokens[:d])
            best = trie.get(key)
            if best is None or probs[d - 1] > best[0]:
                trie[key] = (probs[d - 1], source)
    tree = TokenTree([root], [-1], [0], ["root"])
    kids: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for key in trie:
        kids.setdefault(key[:-1], []).append(key)

    def visit(prefix: tuple[int, ...], index: int) -> None:
        for key in sorted(kids.get(prefix, []), key=lambda k: (-trie[k][0], k)):
            tree.tokens.append(key[-1])
            tree.parents.append(index)
            tree.depths.append(len(key))
            tree.sources.append(trie[key][1])
            visit(key, len(tree.tokens) - 1)

    visit((), 0)
    return tree


def verify(
    tree: TokenTree, logits: torch.Tensor, choose: Callable[[torch.Tensor, Sequence[int]], int]
) -> tuple[list[int], int]:
    """Greedy verification: walk from the root while the model's choice is a child.

    ``choose(node_logits, path_tokens_so_far)`` is the model's greedy (possibly constrained) choice.
    Returns the accepted node indices (root excluded) and the model's next token after them.
    """
    kids = tree.children()
    node = 0
    path: list[int] = []
    tokens: list[int] = []
    while True:
        nxt = choose(logits[node], tokens)
        child = kids[node].get(nxt)
        if child is None:
            return path, nxt
        path.append(child)
        tokens.append(nxt)
        node = child
