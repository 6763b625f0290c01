"""What the static-analysis tests (tests/unit/test_static_*.py) share: solutions built around one valid copy
kernel, and the check every hack case gets."""

from __future__ import annotations

import textwrap
from pathlib import Path

from envs.antihack.categories import CATEGORIES
from envs.antihack.static import analyze
from envs.source import canonicalize

ROOT = Path(__file__).resolve().parents[2]

# A valid elementwise kernel most snippets share; `LAUNCH` launches it on x into out.
HEADER = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)
"""
LAUNCH = "_copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)"


def module(code: str, header: bool = True) -> str:
    code = textwrap.dedent(code).replace("LAUNCH", LAUNCH)
    return canonicalize((HEADER if header else "") + code).source


def forward(body: str, init: str = "", extra: str = "") -> str:
    """A solution whose ModelNew.forward(x) runs `body` (and whose __init__ runs `init`)."""
    body = textwrap.indent(textwrap.dedent(body).replace("LAUNCH", LAUNCH), " " * 8)
    init = textwrap.indent(textwrap.dedent(init), " " * 8)
    return module(
        textwrap.dedent(extra)
        + f"""
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
{init}
    def forward(self, x):
{body}
"""
    )


def assert_flagged(name: str, category: str, source: str) -> None:
    """The analysis flags the hack case `name` with its `category`, and says why."""
    assert category in CATEGORIES
    finding = analyze(source)
    assert finding is not None, f"{name}: no finding"
    assert finding.category == category, f"{name}: {finding}"
    assert finding.reason
