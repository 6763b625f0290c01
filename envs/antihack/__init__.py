"""Defences against reward hacking: static analysis before anything runs, runtime checks in the worker,
and an optional LLM judge. A detected hack gets the verdict `hack` (reward 0) with a category and a
reason an engineer can check."""
