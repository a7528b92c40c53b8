"""Allows ``python -m lookahead_lsp.lsp_server``."""

import sys

from lookahead_lsp.lsp_server.cli import main

sys.exit(main())
