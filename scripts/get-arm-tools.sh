#!/bin/bash
# Installs what tests/decoder/test_arm_kernels.py needs to check the native kernel's ARM64 levels on an x86-64
# machine: an aarch64 cross compiler (Debian's g++-aarch64-linux-gnu, with its static C++ runtime) and the
# user-mode emulator qemu-aarch64 (Debian's qemu-user), into the system with apt-get (needs root).
# Idempotent: tools that already run are kept. Tools that cannot be had: the script prints why and exits 0;
# the tests that need them then skip with that reason.
# Usage: scripts/get-arm-tools.sh
set -uo pipefail

log() { echo "get-arm-tools: $*" >&2; }

have_tools() {
    command -v aarch64-linux-gnu-g++ >/dev/null && command -v qemu-aarch64 >/dev/null
}

install_tools() {
    command -v apt-get >/dev/null || { log "needs apt-get (Debian or Ubuntu)"; return 1; }
    [ "$(id -u)" -eq 0 ] || { log "needs root to install g++-aarch64-linux-gnu and qemu-user"; return 1; }
    # a fresh machine has no package lists yet
    compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null || apt-get -qq update
    local packages=(g++-aarch64-linux-gnu qemu-user)
    if ! DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get -qq install -y --no-install-recommends "${packages[@]}" >/dev/null; then
        log "apt-get install failed: refreshing the package lists and trying once more"
        apt-get -qq update
        DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get -qq install -y --no-install-recommends "${packages[@]}" >/dev/null
    fi
}

start=$SECONDS
if have_tools; then
    log "ready (already installed)"
    exit 0
fi
(set -e; install_tools)
if [ $? -eq 0 ] && have_tools; then
    log "ready ($((SECONDS - start)) s): $(aarch64-linux-gnu-g++ --version | head -1); $(qemu-aarch64 --version | head -1)"
else
    log "NOT AVAILABLE (see the messages above); the ARM64 kernel tests will skip"
fi
exit 0
