#!/usr/bin/env bash
# Type-check the package as it is installed, ``lookahead_lsp.*``. mypy cannot follow pyproject's package-dir mapping
# (decoder/ is ``lookahead_lsp.decoder``), and checking the folders by their own names would leave every
# ``lookahead_lsp.`` import unresolved (Any). So the check runs in a throwaway folder outside the repository that
# lays the package out as installed: lookahead_lsp/__init__.py and one link per subpackage folder; errors name files as
# lookahead_lsp/<folder>/<file>.py, i.e. <folder>/<file>.py here. Extra arguments go to mypy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mypy="${MYPY:-$root/.venv/bin/mypy}"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir "$tree/lookahead_lsp"
ln -s "$root/lookahead_lsp/__init__.py" "$tree/lookahead_lsp/__init__.py"
for package in decoder context lsp_server evaluation; do
    ln -s "$root/$package" "$tree/lookahead_lsp/$package"
done
cd "$tree"
"$mypy" --config-file "$root/pyproject.toml" --cache-dir "$root/.mypy_cache" "$@" -p lookahead_lsp
