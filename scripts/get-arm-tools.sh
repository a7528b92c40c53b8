#!/bin/bash
# Installs what tests/decoder/test_arm_kernels.py needs to check the native kernel's ARM64 levels on an x86-64
# machine: an aarch64 cross compiler (Debian's g++-aarch64-linux-gnu, with its static C++ runtime), the
# user-mode emulator qemu-aarch64 (Debian's qemu-user) and clang (LLVM's code generation for the same levels,
# as Apple's clang builds them on macOS), into the system with apt-get (needs root).
# Idempotent: tools that already run are kept. A tool that cannot be had: the script prints why and goes on
# (exit status 0); the tests that need it then skip with that reason.
# Usage: scripts/get-arm-tools.sh
set -uo pipefail

log() { echo "get-arm-tools: $*" >&2; }

# apt-get install, quietly; once more after refreshing the package lists if that fails (stale lists)
apt_install() {
    command -v apt-get >/dev/null || { log "needs apt-get (Debian or Ubuntu)"; return 1; }
    [ "$(id -u)" -eq 0 ] || { log "needs root to install $*"; return 1; }
    compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null || apt-get -qq update  # a fresh machine has none
    local install=(apt-get -qq install -y --no-install-recommends "$@")
    if ! DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes "${install[@]}" >/dev/null; then
        log "apt-get install $* failed: refreshing the package lists and trying once more"
        apt-get -qq update
        DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes "${install[@]}" >/dev/null
    fi
}

# name, the commands it provides, the packages that provide them
step() {
    local name=$1 commands=$2 start=$SECONDS
    shift 2
    if have "$commands"; then
        log "$name: ready (already installed)"
        return
    fi
    (set -e; apt_install "$@")
    if have "$commands"; then
        log "$name: ready ($((SECONDS - start)) s)"
    else
        log "$name: NOT AVAILABLE (see the messages above); the tests that need it will skip"
    fi
}

have() {
    local command
    for command in $1; do command -v "$command" >/dev/null || return 1; done
}

step "aarch64 cross compiler and qemu-aarch64" "aarch64-linux-gnu-g++ aarch64-linux-gnu-objdump qemu-aarch64" \
    g++-aarch64-linux-gnu qemu-user
step clang "clang++" clang
exit 0
