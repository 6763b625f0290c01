"""Python's `random` state as JSON and back: a checkpoint's meta.json and the loop's state both store it, and a
JSON round trip turns the state's inner tuple into a list that `random.setstate` refuses."""

from __future__ import annotations


def encode_python_rng(state: tuple) -> list:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def decode_python_rng(state: list) -> tuple:
    version, internal, gauss = state
    return (version, tuple(internal), gauss)
