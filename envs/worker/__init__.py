"""Isolated worker processes that run untrusted candidate code (harness) and their parent-side handle."""
