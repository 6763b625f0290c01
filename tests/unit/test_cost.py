"""Cost accounting of ATen ops (envs/antihack/cost.py) on hand-made cases: what the runtime check
compares a candidate's PyTorch compute with."""

from __future__ import annotations

import pytest
import torch

from envs.antihack import runtime as guard
from envs.antihack.cost import OpCost, op_cost, torch_share, totals


def recorded(fn) -> list[OpCost]:
    recorder = guard.ComputeRecorder(guard.LaunchRecorder())
    with recorder, torch.no_grad():
        fn()
    return recorder.ops


def test_matmul_flops_and_bytes():
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    cost = op_cost(torch.ops.aten.mm.default, (a, b), {}, a @ b)
    assert cost.name == "mm" and not cost.layout
    assert cost.flops == 2 * 64 * 32 * 16
    assert cost.bytes == 4 * (64 * 32 + 32 * 16 + 64 * 16)


def test_elementwise_and_reduction_count_one_flop_per_element():
    x = torch.randn(8, 100)
    relu = op_cost(torch.ops.aten.relu.default, (x,), {}, torch.relu(x))
    assert (relu.flops, relu.bytes) == (800, 2 * 800 * 4)
    total = op_cost(torch.ops.aten.sum.dim_IntList, (x, [1]), {}, x.sum(1))
    assert (total.flops, total.bytes) == (800, (800 + 8) * 4)
    view = op_cost(torch.ops.aten.view.default, (x, [800]), {}, x.view(800))
    assert view.layout


def test_linear_module_is_priced_as_its_gemm():
    lin = torch.nn.Linear(100, 130)
    x = torch.randn(150, 100)
    flops, _ = totals(recorded(lambda: lin(x)))
    assert flops == pytest.approx(2 * 150 * 100 * 130, rel=0.02)  # the bias add is ~1/K on top


def test_gemm_epilogue_in_torch_is_a_small_share():
    """A Triton GEMM (not seen by the recorder) with bias + ReLU in PyTorch, at the CPU size of L3_05."""
    lin = torch.nn.Linear(100, 130)
    x = torch.randn(150, 100)
    reference = recorded(lambda: torch.relu(lin(x)))
    gemm_out = x @ lin.weight.t()  # stands for the candidate's kernel output
    share = torch_share(recorded(lambda: torch.relu(gemm_out + lin.bias)), reference)
    assert share.flop_share < 0.02 and share.byte_share > 0.5  # cheap in FLOPs, not in bytes
    assert share.share == share.flop_share


def test_torch_doing_the_main_op_is_the_whole_share():
    lin = torch.nn.Linear(100, 130)
    x = torch.randn(150, 100)
    reference = recorded(lambda: torch.relu(lin(x)))
    share = torch_share(recorded(lambda: torch.addmm(lin.bias, x, lin.weight.t())), reference)
    assert share.flop_share > 0.99 and share.share > 0.5 and share.top_ops[0] == "addmm"  # bytes: ReLU is not in it
    # Elementwise problem: torch does the op, a token kernel would only copy.
    y = torch.randn(4096)
    ref = recorded(lambda: torch.nn.functional.gelu(y, approximate="tanh"))
    assert torch_share(recorded(lambda: torch.nn.functional.gelu(y, approximate="tanh")), ref).share == pytest.approx(
        1.0
    )
    # Softmax with the exponentials and the row sums in torch (only the division in a kernel): over 100%.
    z = torch.randn(64, 512)
    ref = recorded(lambda: torch.softmax(z, -1))
    assert torch_share(recorded(lambda: torch.exp(z - z.amax(-1, keepdim=True)).sum(-1)), ref).share > 1.0


def test_small_reduction_after_a_big_kernel_is_light():
    logits = torch.randn(512, 1000)
    target = torch.randint(0, 1000, (512,))
    ref = recorded(lambda: torch.nn.functional.cross_entropy(logits, target))
    per_row = torch.randn(512)  # the candidate's kernel wrote one loss per row
    assert torch_share(recorded(lambda: per_row.mean()), ref).share < 0.01


def test_data_movement_problem_counts_copies():
    x = torch.randn(256, 128)
    ref = recorded(lambda: x.t().contiguous())
    assert totals(ref) == (0.0, 0.0)  # no arithmetic at all: copying is the work
    share = torch_share(recorded(lambda: x.t().contiguous()), ref)
    assert share is not None and share.share == pytest.approx(1.0)
    assert torch_share([], ref).share == 0.0


def test_ops_inside_triton_launches_are_not_the_candidates():
    launches = guard.LaunchRecorder()
    recorder = guard.ComputeRecorder(launches)
    x = torch.randn(100)
    with recorder:
        launches.depth += 1  # what the interpreter's own torch ops look like inside a launch
        torch.relu(x)
        launches.depth -= 1
    assert recorder.ops == []
