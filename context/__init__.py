"""Workspace context: scanning, the n-gram index, prompts, syntax-aware stop rules and trimming."""
