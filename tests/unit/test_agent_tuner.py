"""The launch-configuration operator: which sites it finds and that each variant changes exactly one of them."""

import ast
from pathlib import Path

from rl.agent.tuner import find_sites, variants

ROOT = Path(__file__).resolve().parents[2]

LAUNCH = """
import triton
@triton.jit
def k(x, BLOCK_M: tl.constexpr):
    pass
def run(x):
    BLOCK_M: int = 64
    k[(1,)](x, BLOCK_M=BLOCK_M, num_warps=4, num_stages=3)
    k[(1,)](x, BLOCK_M=32)
"""


def test_finds_assignments_launch_keywords_and_missing_warps():
    sites = find_sites(LAUNCH)
    assert [(s.kind, s.name, s.value) for s in sites] == [
        ("assign", "BLOCK_M", 64),
        ("keyword", "num_warps", 4),
        ("keyword", "num_stages", 3),
        ("missing_warps", "num_warps", 4),
        ("keyword", "BLOCK_M", 32),
    ]


def test_each_variant_changes_one_site_to_a_neighbour():
    out = variants(LAUNCH)
    descriptions = [v.description for v in out]
    assert "num_stages 3->4 (line 8)" in descriptions and "num_stages 3->2 (line 8)" in descriptions
    assert "BLOCK_M 64->128 (line 7)" in descriptions and "BLOCK_M 32->16 (line 9)" in descriptions
    assert "num_warps 4->8 (line 9, added)" in descriptions
    assert not any("32->64" in d and "line 7" in d for d in descriptions)
    base = ast.dump(ast.parse(LAUNCH))
    for v in out:
        tree = ast.parse(v.source)  # every variant is valid Python
        assert ast.dump(tree) != base
        changed = [(a, b) for a, b in zip(ast.unparse(ast.parse(LAUNCH)).splitlines(), v.source.splitlines()) if a != b]
        assert len(changed) == 1, (v.description, changed)


def test_limits_keep_values_valid():
    code = "def f(x):\n    k[(1,)](x, BLOCK=16, num_warps=16, num_stages=1)\n"
    descriptions = [v.description for v in variants(code)]
    assert descriptions == ["BLOCK 16->32 (line 2)", "num_warps 16->8 (line 2)", "num_stages 1->2 (line 2)"]


def test_reference_solution_variants_and_no_sites():
    relu = (ROOT / "envs/builtin/solutions/L0_02_relu.py").read_text()
    assert {v.description for v in variants(relu)} == {
        "BLOCK 4096->8192 (line 25)",
        "BLOCK 4096->2048 (line 25)",
        "num_warps 8->16 (line 26)",
        "num_warps 8->4 (line 26)",
    }
    assert variants("def forward(x):\n    return x\n") == []
    assert variants("def broken(:\n") == []
    # plain calls and non-literal values are not sites
    sites = find_sites("f(BLOCK=64)\nk[(1,)](x, BLOCK=n)\nBLOCK = n * 2\n")
    assert [(s.kind, s.line) for s in sites] == [("missing_warps", 2)]
