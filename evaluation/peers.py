"""The llama-server configurations benchmarked beside us: the n-gram speculation sweep and the peers by name.

Plain data, importing nothing of the project: :mod:`evaluation.speed` names the peers among its decoders and
:mod:`evaluation.llama_peer` starts them, without either importing the other.
"""

from __future__ import annotations

# The n-gram speculation settings swept once (docs/benchmarks.md has the table and the command): each type
# with its default sizes and with shorter lookups / drafts, which suit short code completions.
SPEC_SWEEP: dict[str, tuple[str, ...]] = {
    "simple-n12m48": ("--spec-type", "ngram-simple"),
    "simple-n4m16": (
        *("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "4", "--spec-ngram-simple-size-m", "16"),
    ),
    "simple-n3m8": (
        *("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "8"),
    ),
    "map-k-n12m48": ("--spec-type", "ngram-map-k"),
    "map-k-n4m16": (
        *("--spec-type", "ngram-map-k", "--spec-ngram-map-k-size-n", "4", "--spec-ngram-map-k-size-m", "16"),
    ),
    "mod-n24": ("--spec-type", "ngram-mod"),
    "mod-n8": (
        *("--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", "8", "--spec-ngram-mod-n-min", "4"),
        *("--spec-ngram-mod-n-max", "16"),
    ),
}
BEST_NGRAM = "mod-n8"  # the sweep's fewest passes per token, 92% of drafts accepted (docs/benchmarks.md)

# Configuration name -> llama-server's extra command-line arguments.
PEERS: dict[str, tuple[str, ...]] = {
    "llama-server": (),
    "llama-server-ngram": SPEC_SWEEP[BEST_NGRAM],
    "llama-server-simple": SPEC_SWEEP["simple-n3m8"],
    "llama-server-map-k": SPEC_SWEEP["map-k-n4m16"],
}
ALL_PEERS = "llama-servers"  # the --decoders name that stands for every configuration of PEERS
