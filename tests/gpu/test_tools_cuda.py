"""The profile and kernel_evaluator tools on a GPU: per-kernel device time from the isolated worker, and the
feedback of a correct reference (both speedups, own-kernel share) and of a broken one."""

from __future__ import annotations

import asyncio

import pytest

from envs import EvalSettings, Evaluator
from envs.tools import TOOLS, ToolContext
from tests.conftest import builtin

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def backend():
    with Evaluator(EvalSettings(device="cuda", workers=1)) as ev:
        yield ev


def call(tool, code, problem, backend):
    return asyncio.run(TOOLS[tool].run({"code": code}, ToolContext(problem, evaluator=backend, profiler=backend)))


@pytest.mark.parametrize("problem_id", ["L0_02_relu", "L2_01_softmax"])
def test_profile_reports_the_candidates_kernels_against_peak(backend, problem_id):
    problem, solution = builtin(problem_id)
    result = call("profile", solution, problem, backend)
    assert result.ok, result.text
    assert "device time per forward:" in result.text and "% of peak" in result.text and "(yours)" in result.text
    if "H200" in result.text or "H100" in result.text:  # float32 problems: the CUDA-core float32 peak
        assert "float32 peak 67 TFLOP/s" in result.text or "achieved compute" not in result.text


def test_profile_on_the_ray_pool():
    """RayEvaluationPool.profile: the same facts from a GPU actor (skipped where ray is not installed)."""
    pytest.importorskip("ray")
    from envs.pool import PoolConfig, RayEvaluationPool

    problem, solution = builtin("L3_01_matmul")
    with RayEvaluationPool(EvalSettings(device="cuda", workers=1), PoolConfig(num_actors=1)) as pool:
        result = asyncio.run(
            TOOLS["profile"].run({"code": solution}, ToolContext(problem, evaluator=pool, profiler=pool))
        )
    assert result.ok, result.text
    assert "achieved compute:" in result.text and "(yours)" in result.text


def test_kernel_evaluator_feedback_on_cuda(backend):
    problem, solution = builtin("L0_02_relu")
    good = call("kernel_evaluator", solution, problem, backend)
    assert "status: correct" in good.text and "speedup vs eager PyTorch:" in good.text
    assert "speedup vs TorchInductor:" in good.text and "own-kernel share of device time:" in good.text
    bad = call("kernel_evaluator", solution.replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.5)"), problem, backend)
    assert "status: incorrect" in bad.text and "mismatch:" in bad.text
