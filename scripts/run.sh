#!/usr/bin/env bash
# Run lookahead-lsp from this checkout: set up first (quick and silent when all is in place; the first time a
# line on stderr per step and at least every 8 s), then exec the CLI. stdout is the command's own.
# Usage: scripts/run.sh [ARGS...]     e.g. scripts/run.sh serve
# LOOKAHEAD_LSP_NO_1_5B=1 scripts/run.sh ...: set up without the 1.5B (scripts/setup.sh --no-1.5b, small disks).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
"$root/scripts/setup.sh"
exec "$root/.venv/bin/lookahead-lsp" "$@"
