#!/usr/bin/env bash
# Installs a real OpenAI-compatible inference engine for the remote-backend tests and benchmark: llama.cpp's
# server through llama-cpp-python[server], in its own venv so the project venv stays clean.
#   ~/.cache/lookahead-lsp/wheels/llama_cpp_python-*.whl   built ONCE from the PyPI sdist (compiles llama.cpp:
#                                          many minutes; kept in the user cache like pip's, shared by checkouts)
#   .tools/engine-venv/                   the venv that runs `python -m llama_cpp.server`
# Idempotent: an engine venv whose server imports is kept; a wheel already built is reused. If the engine
# cannot be built it prints the reason and exits 0: tests that need it skip with that reason.
# Usage: scripts/get-engine.sh            (environment: PYTHON=python3.x, ENGINE_JOBS=N parallel compile jobs)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS=${LOOKAHEAD_TOOLS:-$ROOT/.tools}
WHEELS=${LOOKAHEAD_LSP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lookahead-lsp}/wheels
VENV=$TOOLS/engine-venv
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
PYTHON=${PYTHON:-python3}
JOBS=${ENGINE_JOBS:-2}

log() { echo "get-engine: $*" >&2; }
give_up() { log "engine NOT AVAILABLE: $*; the remote-engine tests will skip"; exit 0; }

server_ok() { "$VENV/bin/python" -c 'import llama_cpp.server.app, uvicorn' >/dev/null 2>&1; }

if [[ -x "$VENV/bin/python" ]] && server_ok; then
    log "ready: $VENV ($("$VENV/bin/python" -c 'import llama_cpp; print("llama-cpp-python", llama_cpp.__version__)'))"
    exit 0
fi
mkdir -p "$WHEELS" || give_up "cannot create $WHEELS"

wheel=$(ls "$WHEELS"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n1)
if [[ -z "$wheel" ]]; then
    command -v cmake >/dev/null || give_up "cmake not found (apt-get install cmake)"
    command -v c++ >/dev/null || give_up "no C++ compiler found (apt-get install g++)"
    log "building llama-cpp-python $VERSION (compiles llama.cpp, CPU only; takes many minutes on a small machine)"
    start=$SECONDS
    # Portable CPU build, no tests/examples/tools: only the shared libraries the Python binding loads.
    export CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
-DLLAMA_CURL=OFF -DGGML_OPENMP=OFF"
    export CMAKE_BUILD_PARALLEL_LEVEL=$JOBS
    buildlog=$TOOLS/engine-build.log
    if ! nice -n 19 "$PYTHON" -m pip wheel --no-deps --no-cache-dir -w "$WHEELS" "llama-cpp-python==$VERSION" \
        >"$buildlog" 2>&1; then
        tail -n 30 "$buildlog" >&2
        give_up "the llama-cpp-python build failed (full log: $buildlog)"
    fi
    wheel=$(ls "$WHEELS"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n1)
    [[ -n "$wheel" ]] || give_up "pip reported success but left no wheel in $WHEELS"
    log "built $(basename "$wheel") in $((SECONDS - start)) s"
fi

if [[ ! -x "$VENV/bin/python" ]]; then
    "$PYTHON" -m venv "$VENV" || give_up "'$PYTHON -m venv' failed (apt-get install python3-venv)"
fi
# The [server] extra (fastapi, uvicorn, sse-starlette, ...) comes from PyPI; the binding from the built wheel.
if ! "$VENV/bin/python" -m pip install --quiet --find-links "$WHEELS" "llama-cpp-python[server]==$VERSION" >&2; then
    give_up "installing $(basename "$wheel") with its server extra failed"
fi
server_ok || give_up "llama_cpp.server does not import in $VENV"
log "ready: $VENV"
