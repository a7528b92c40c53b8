"""Subcommands of the lookahead-lsp command line, one module each."""
