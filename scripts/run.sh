#!/usr/bin/env bash
# Run lookahead-lsp from this checkout: set up quietly first (quick when all is in place), then exec the CLI.
# Usage: scripts/run.sh [ARGS...]     e.g. scripts/run.sh serve
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
"$root/scripts/setup.sh" --quiet
exec "$root/.venv/bin/lookahead-lsp" "$@"
