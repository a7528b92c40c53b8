#!/usr/bin/env bash
# Run the test suite from a fresh checkout: set up the project (scripts/setup.sh), fetch the real editors and
# the llama.cpp engine for the end-to-end tests and the aarch64 cross tools for the ARM64 kernel tests (each
# prints why and goes on when it cannot), lint, then pytest.
# Extra arguments go to pytest, e.g. `scripts/test.sh -k lookahead`. Both embedded models are set up, so the 1.5B's
# tests run; LOOKAHEAD_LSP_NO_1_5B=1 (scripts/setup.sh --no-1.5b) leaves it out for small disks and skips them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

bash scripts/setup.sh --quiet
for extra in scripts/get-editors.sh scripts/get-engine.sh scripts/get-arm-tools.sh; do
    if [[ -f "$extra" ]]; then
        bash "$extra" || echo "test: $extra failed; the tests that need it will say they were skipped" >&2
    fi
done

.venv/bin/ruff check decoder context lsp_server evaluation tests
bash scripts/mypy.sh
exec .venv/bin/python -m pytest -ra "$@"
