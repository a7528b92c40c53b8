"""The LSP daemon, its scheduler, the completion pipeline and the command line."""
