"""The evaluation subcommands of `lookahead-lsp` (bench, eval, bench-*): arguments and runs, one module each."""
