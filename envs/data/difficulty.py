"""Stage: difficulty L0-L5, on the built-in set's scale (docs/problem-format.md): L0 trivial elementwise,
L1 activations and row reductions, L2 softmax/norms/scans/losses, L3 GEMMs with epilogues, L4
convolutions, pooling and group norms, L5 attention and fusions of a heavy op with a reduction or a norm.

Two estimators: an LLM judge through an OpenAI-compatible endpoint (rubric in
conf/curate/difficulty_rubric.md; cached, retried), and a structural estimate from the ops the reference
calls (the default, and the fallback whenever the judge gives no usable answer, which the manifest notes).
The structural estimate's agreement with the built-in set's hand-assigned levels is in docs/curation.md.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

from envs.data.llm import CurationLLM, LLMUnavailable
from envs.data.records import CandidateProblem, StageResult

__all__ = ["structural_level", "op_categories", "parse_level", "assign_difficulty"]

# Call / attribute names -> category, and each category's base level.
_CATEGORIES: dict[str, set[str]] = {
    "attention": {
        "scaled_dot_product_attention",
        "MultiheadAttention",
        "multi_head_attention_forward",
        "Transformer",
        "TransformerEncoderLayer",
        "TransformerDecoderLayer",
    },
    "conv": {
        "conv1d",
        "conv2d",
        "conv3d",
        "Conv1d",
        "Conv2d",
        "Conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "ConvTranspose1d",
        "ConvTranspose2d",
        "ConvTranspose3d",
        "unfold",
        "fold",
        "Unfold",
        "Fold",
    },
    "pool": {
        "max_pool1d",
        "max_pool2d",
        "max_pool3d",
        "avg_pool1d",
        "avg_pool2d",
        "avg_pool3d",
        "MaxPool1d",
        "MaxPool2d",
        "MaxPool3d",
        "AvgPool1d",
        "AvgPool2d",
        "AvgPool3d",
        "adaptive_avg_pool2d",
        "adaptive_max_pool2d",
        "AdaptiveAvgPool2d",
        "AdaptiveMaxPool2d",
        "AdaptiveAvgPool1d",
        "AdaptiveAvgPool3d",
        "lp_pool2d",
        "LPPool2d",
        "interpolate",
        "Upsample",
        "grid_sample",
    },
    "gemm": {
        "matmul",
        "mm",
        "bmm",
        "baddbmm",
        "addmm",
        "einsum",
        "linear",
        "Linear",
        "Bilinear",
        "bilinear",
        "LSTM",
        "GRU",
        "RNN",
        "LSTMCell",
        "GRUCell",
        "RNNCell",
        "tensordot",
    },
    "norm": {
        "layer_norm",
        "LayerNorm",
        "group_norm",
        "GroupNorm",
        "batch_norm",
        "BatchNorm1d",
        "BatchNorm2d",
        "BatchNorm3d",
        "instance_norm",
        "InstanceNorm1d",
        "InstanceNorm2d",
        "InstanceNorm3d",
        "rms_norm",
        "RMSNorm",
        "normalize",
        "local_response_norm",
        "LocalResponseNorm",
    },
    "softmax": {
        "softmax",
        "log_softmax",
        "Softmax",
        "LogSoftmax",
        "logsumexp",
        "cumsum",
        "cumprod",
        "cummax",
        "Softmin",
        "softmin",
        "Softmax2d",
    },
    "loss": {
        "cross_entropy",
        "nll_loss",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "kl_div",
        "huber_loss",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "CrossEntropyLoss",
        "NLLLoss",
        "MSELoss",
        "L1Loss",
        "KLDivLoss",
        "HuberLoss",
        "SmoothL1Loss",
        "BCELoss",
        "BCEWithLogitsLoss",
        "cosine_similarity",
        "triplet_margin_loss",
        "margin_ranking_loss",
        "hinge_embedding_loss",
    },
    "reduction": {
        "sum",
        "mean",
        "amax",
        "amin",
        "max",
        "min",
        "argmax",
        "argmin",
        "prod",
        "var",
        "std",
        "norm",
        "all",
        "any",
        "median",
    },
    "transcendental": {
        "gelu",
        "GELU",
        "sigmoid",
        "Sigmoid",
        "tanh",
        "Tanh",
        "softplus",
        "Softplus",
        "silu",
        "SiLU",
        "mish",
        "Mish",
        "elu",
        "ELU",
        "selu",
        "SELU",
        "celu",
        "CELU",
        "exp",
        "log",
        "erf",
        "hardswish",
        "Hardswish",
        "logsigmoid",
        "LogSigmoid",
        "swish",
        "pow",
        "sqrt",
        "rsqrt",
        "sin",
        "cos",
        "Tanhshrink",
        "tanhshrink",
        "softsign",
        "Softsign",
        "glu",
        "GLU",
    },
}
_BASE = {
    "attention": 5,
    "conv": 4,
    "pool": 4,
    "gemm": 3,
    "norm": 2,
    "softmax": 2,
    "loss": 2,
    "reduction": 1,
    "transcendental": 1,
}
_HEAVY = {"attention", "conv", "gemm"}
_REDUCING = {"norm", "softmax", "loss"}


def op_categories(source: str) -> dict[str, int]:
    """How many calls of each op category `Model` and the module's helpers make (names, not semantics)."""
    counts: dict[str, int] = {}
    for node in ast.walk(ast.parse(source)):
        name = None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            name = "matmul"
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
                continue  # self.linear(x): the submodule built in __init__ is already counted there
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if name is None:
            continue
        for category, names in _CATEGORIES.items():
            if name in names:
                counts[category] = counts.get(category, 0) + 1
                break
    return counts


def structural_level(source: str) -> int:
    """L0-L5 from the op categories: the hardest category's base level; a heavy op (GEMM, convolution) fused with
    a norm/softmax/loss or with a second heavy op is L5; two reducing passes (a norm then a softmax) add one; a
    model calling none of the listed ops (elementwise arithmetic) is L0."""
    counts = op_categories(source)
    if not counts:
        return 0
    level = max(_BASE[c] for c in counts)
    heavy = sum(n for c, n in counts.items() if c in _HEAVY)
    if heavy and (set(counts) & _REDUCING or heavy > 1):
        level = 5
    elif not heavy and len(set(counts) & (_REDUCING | {"reduction"})) >= 2:
        level += 1  # e.g. a norm then a softmax: two passes over the data to fuse
    return min(level, 5)


_LEVEL = re.compile(r"\bL(?:EVEL)?\s*[:=]?\s*([0-5])\b", re.IGNORECASE)


def parse_level(answer: str) -> int | None:
    """The level an LLM answer states ("LEVEL: 3", "L3"); the last one stated wins; None when there is none."""
    found = _LEVEL.findall(answer)
    return int(found[-1]) if found else None


def assign_difficulty(
    candidates: list[CandidateProblem], llm: CurationLLM | None = None, rubric_path: str | Path | None = None
) -> StageResult:
    result = StageResult("difficulty")
    rubric = Path(rubric_path).read_text() if llm is not None and rubric_path else None
    for c in candidates:
        structural = structural_level(c.source)
        level, how = structural, "structural"
        if llm is not None:
            try:
                answer, cached = llm.ask(rubric or "", f"Reference program:\n```python\n{c.source}\n```")
                judged = parse_level(answer)
                if judged is None:
                    result.note(c, f"LLM judge answer states no level ({answer[:120]!r}); structural estimate used")
                else:
                    level, how = judged, f"llm:{llm.model}{' (cached)' if cached else ''}"
            except LLMUnavailable as e:
                result.note(c, f"LLM judge unavailable ({e}); structural estimate used")
        facts = {**c.facts, "difficulty": {"level": level, "by": how, "structural": structural}}
        result.keep(dataclasses.replace(c, level=level, facts=facts), f"L{level} ({how})")
    return result
