"""Rule-based inputs for a crawled module: values for its required constructor arguments from their names, and
a short ordered list of input-shape guesses from its constructor's size arguments and its name. Validation
runs the guesses in order and keeps the first that works; a module whose signature says too little (a
`config` object, *args) gets no guess here (the LLM option writes inputs for those).

Each guess has a full size (eager PyTorch around a millisecond or more on an H100-class GPU: tens of
millions of elements) and a small size for the CPU interpreter (SMALL_SIZES, <= ~65k elements).
"""

from __future__ import annotations

import dataclasses

from envs.data.crawl.extract import ModuleClass

__all__ = ["InputGuess", "TensorSpec", "guess_inputs", "INIT_RULES"]


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    dims: tuple[str, ...]  # module constant names
    kind: str = "randn"  # randn | rand (probabilities, non-negative) | index (integers below `high`)
    high: str | None = None  # the constant bounding an index tensor


@dataclasses.dataclass(frozen=True)
class InputGuess:
    init: tuple[tuple[str, str], ...]  # constructor keyword -> module constant
    inputs: tuple[TensorSpec, ...]
    constants: tuple[tuple[str, int | float, int | float | None], ...]  # name, full, small (None: unscaled)
    note: str


# Constructor argument name -> (constant, full, small). Feature-like sizes share one constant, so that
# `in_features`, `normalized_shape` and the input's last dimension agree.
INIT_RULES: dict[str, tuple[str, int | float, int | float | None]] = {
    **{
        n: ("FEATURES", 4096, 64)
        for n in (
            "in_features",
            "in1_features",
            "in2_features",
            "embed_dim",
            "d_model",
            "hidden_size",
            "input_size",
            "normalized_shape",
            "embedding_dim",
            "features",
            "dim_model",
        )
    },
    "out_features": ("OUT_FEATURES", 4096, 48),
    **{n: ("CHANNELS", 64, 8) for n in ("in_channels", "num_features", "num_channels", "channels", "C")},
    "out_channels": ("OUT_CHANNELS", 64, 8),
    "kernel_size": ("KERNEL_SIZE", 3, None),
    "num_groups": ("NUM_GROUPS", 4, None),
    **{n: ("NUM_HEADS", 8, None) for n in ("num_heads", "nhead", "heads")},
    "num_embeddings": ("NUM_EMBEDDINGS", 32768, 128),
    **{n: ("FACTOR", 2, None) for n in ("upscale_factor", "downscale_factor", "scale_factor")},
    "output_size": ("OUTPUT_SIZE", 7, None),
    "size": ("SIZE", 5, None),  # LocalResponseNorm's neighbourhood
    "dim": ("DIM", 1, None),
    "normalized_ndim": ("NDIM", 1, None),
    "padding": ("PADDING", 1, None),
    "groups": ("GROUPS", 1, None),
    "lambd": ("LAMBD", 0.5, None),
    "threshold": ("THRESHOLD", 0.1, None),
    "value": ("VALUE", 0.0, None),
    "p": ("P_NORM", 2.0, None),
    "norm_type": ("P_NORM", 2.0, None),
}

# Input layouts: name -> dims (constant, full, small).
_LAYOUTS = {
    "flat": [("BATCH", 4096, 64), ("FEATURES", 4096, 64)],
    "seq": [("BATCH", 32, 2), ("SEQ", 512, 16), ("FEATURES", 1024, 32)],
    "c1d": [("BATCH", 32, 2), ("CHANNELS", 64, 8), ("LENGTH", 8192, 256)],
    "c2d": [("BATCH", 32, 2), ("CHANNELS", 64, 8), ("HEIGHT", 128, 16), ("WIDTH", 128, 16)],
    "c3d": [("BATCH", 8, 2), ("CHANNELS", 32, 4), ("DEPTH", 32, 8), ("HEIGHT", 64, 8), ("WIDTH", 64, 8)],
}
_CHANNEL_ARGS = {"in_channels", "num_features", "num_channels", "channels", "C"}
_FEATURE_ARGS = {k for k, v in INIT_RULES.items() if v[0] == "FEATURES"}
_TARGET_ARGS = {"target", "targets", "label", "labels", "y"}


def _layouts(cls: ModuleClass, init: set[str]) -> list[str]:
    name = cls.name.lower()
    spatial = "c1d" if "1d" in name else "c2d" if "2d" in name else "c3d" if "3d" in name else None
    if init & _CHANNEL_ARGS or spatial:
        channel_first = [spatial] if spatial else []
        return channel_first + [x for x in ("c2d", "c1d", "c3d", "flat") if x not in channel_first]
    if init & _FEATURE_ARGS:
        return ["flat", "seq"]
    return ["flat", "c2d", "seq"]


def guess_inputs(cls: ModuleClass, max_guesses: int = 3) -> tuple[list[InputGuess], str | None]:
    """(guesses in the order to try, None) or ([], why there is none)."""
    if cls.init_varargs and not cls.init_params:
        return [], "the constructor takes only *args/**kwargs: the signature names no sizes"
    required_init = [n for n, has_default in cls.init_params if not has_default]
    unknown = [n for n in required_init if n not in INIT_RULES]
    if unknown:
        return [], f"no rule for required constructor argument(s) {unknown}"
    tensors = [n for n, has_default in cls.forward_params if not has_default]
    if not tensors:
        return [], "forward takes no required tensor argument"
    if cls.forward_varargs and len(tensors) == 0:
        return [], "forward takes only *args"
    init = {n: INIT_RULES[n] for n in required_init}
    guesses = []
    for layout in _layouts(cls, set(required_init))[:max_guesses]:
        dims = list(_LAYOUTS[layout])
        consts = {c: (f, s) for c, f, s in dims}
        for constant, full, small in init.values():
            consts.setdefault(constant, (full, small))
        # A feature or channel argument sizes the input's matching dimension: make them the same constant.
        shape = tuple(c for c, _, _ in dims)
        specs = []
        for arg in tensors:
            if (
                arg in _TARGET_ARGS
                and "Loss" in cls.name
                and cls.name in ("CrossEntropyLoss", "NLLLoss", "MultiMarginLoss", "MultiLabelMarginLoss")
            ):
                specs.append(TensorSpec((shape[0],) + shape[2:], "index", shape[1]))
            elif "Loss" in cls.name:
                specs.append(TensorSpec(shape, "rand"))
            elif "num_embeddings" in init:
                specs.append(TensorSpec(shape[:-1], "index", "NUM_EMBEDDINGS"))  # -> shape
            else:
                specs.append(TensorSpec(shape))
        constants = tuple((c, f, s) for c, (f, s) in consts.items())
        guesses.append(
            InputGuess(
                tuple((n, INIT_RULES[n][0]) for n in required_init),
                tuple(specs),
                constants,
                f"rule-based: {layout} input {tuple(shape)}",
            )
        )
    return guesses, None
