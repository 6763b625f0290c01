"""The float64-truth rule, the input families and the sensitivity probe through the real Evaluator on CPU
(Triton interpreter). Two problems written here make situations otherwise seen only at GPU sizes happen at a
CPU size: a reference with real fp32 rounding error (a cumsum computed as a triangular matmul), and a
loss whose value a strided subsample estimates within tolerance on the problem's own inputs."""

import textwrap
from pathlib import Path

import pytest

from envs import EvalSettings, Evaluator, PhaseTimeouts, Status, resolve_problem
from envs.problems import load_problem_file
from rewards.kernel_reward import reward_for_verdict

pytestmark = pytest.mark.integration

HACKS = Path(__file__).resolve().parents[1] / "hacks"
BUILTIN = Path(__file__).resolve().parents[2] / "envs" / "builtin" / "solutions"

# PyTorch's CPU cumsum accumulates float32 in double; a triangular matmul rounds like a GPU scan does.
MATMUL_CUMSUM = textwrap.dedent('''
    """Row prefix sums of large unscaled values, computed by the reference as x @ triu(ones)."""
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            n = x.shape[1]
            return x @ torch.ones(n, n, device=x.device).triu()

    rows = 16
    cols = 2048
    SMALL_SIZES = {"rows": 16, "cols": 2048}

    def get_inputs():
        return [16 * torch.randn(rows, cols)]

    def get_init_inputs():
        return []
''')

# The mean square of values near a random constant: the mean over half the tiles is within ~1e-5 of the
# mean over all of them on these inputs (and on the timing phase's refilled ones, drawn alike).
MEAN_SQUARE = textwrap.dedent('''
    """Mean of the squares of a (batch, dim) tensor."""
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return (x * x).mean()

    batch_size = 8
    dim = 8192
    SMALL_SIZES = {"batch_size": 8, "dim": 8192}

    def get_inputs():
        return [1.0 + torch.rand(()) + 1e-3 * torch.randn(batch_size, dim)]

    def get_init_inputs():
        return []
''')

MEAN_SQUARE_SOLUTION = textwrap.dedent("""
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl

    STRIDE = {stride}  # 2: every other tile (the shortcut); 1: all of them

    @triton.jit
    def _tile_squares(x_ptr, part_ptr, n, STEP: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = (STEP * pid).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(part_ptr + pid, tl.sum(x * x, axis=0))

    @triton.jit
    def _finish(part_ptr, out_ptr, n_part, n_read, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        acc = tl.load(part_ptr + offs, mask=offs < n_part, other=0.0)
        tl.store(out_ptr, tl.sum(acc, axis=0) / n_read)

    class ModelNew(nn.Module):
        def forward(self, x):
            x = x.contiguous()
            n = x.numel()
            n_part = triton.cdiv(triton.cdiv(n, 1024), STRIDE)
            part = torch.empty(n_part, device=x.device, dtype=torch.float32)
            out = torch.empty((), device=x.device, dtype=torch.float32)
            _tile_squares[(n_part,)](x, part, n, STEP=STRIDE, BLOCK=1024)
            _finish[(1,)](part, out, n_part, min(n, n_part * 1024), BLOCK=triton.next_power_of_2(n_part))
            return out
""")

NO_FIDELITY = {"input_families": (), "sensitivity_probe": False}


def evaluate(problem, solution: str, **settings):
    base = {"device": "cpu", "seed": 20261201, "timeouts": PhaseTimeouts(correctness=120, timing=60)}
    with Evaluator(EvalSettings(**{**base, **settings})) as ev:
        return ev.evaluate(problem, solution)


@pytest.fixture(scope="module")
def matmul_cumsum(tmp_path_factory):
    path = tmp_path_factory.mktemp("problems") / "matmul_cumsum.py"
    path.write_text(MATMUL_CUMSUM)
    return load_problem_file(path)


@pytest.fixture(scope="module")
def mean_square(tmp_path_factory):
    path = tmp_path_factory.mktemp("problems") / "mean_square.py"
    path.write_text(MEAN_SQUARE)
    return load_problem_file(path)


def test_blocked_scan_is_correct_by_the_float64_truth(matmul_cumsum):
    scan = (BUILTIN / "L2_05_cumsum.py").read_text()
    v = evaluate(matmul_cumsum, scan)
    assert v.status is Status.CORRECT, v.error
    acc = v.accuracy
    assert acc.rule == "fp64_truth" and acc.truth_multiple == 16.0
    assert acc.candidate_vs_truth.max_abs <= 16 * acc.reference_vs_truth.max_abs + 1e-3
    assert acc.candidate_vs_reference.max_abs > 1e-4  # beyond the plain tolerance somewhere
    plain = evaluate(matmul_cumsum, scan, fp64_truth="off")
    assert plain.status is Status.INCORRECT and plain.accuracy.rule == "reference"


def test_fp16_carry_fails_where_the_truth_relaxes_the_tolerance(matmul_cumsum):
    v = evaluate(matmul_cumsum, (HACKS / "hack_low_precision_fp16_carry_scan.py").read_text())
    assert v.status is Status.INCORRECT and reward_for_verdict(v) == 0.0
    assert v.accuracy.rule == "fp64_truth" and "float64 truth" in v.error
    assert v.accuracy.candidate_vs_truth.rms > 16 * v.accuracy.reference_vs_truth.rms


def test_always_records_the_truth_for_every_verdict():
    v = evaluate(resolve_problem("L1_05_row_sum"), (BUILTIN / "L1_05_row_sum.py").read_text(), fp64_truth="always")
    assert v.status is Status.CORRECT and v.accuracy.rule == "reference"
    assert v.accuracy.candidate_vs_truth is not None and v.accuracy.reference_vs_truth is not None
    assert v.accuracy.families == list(EvalSettings().input_families) and v.accuracy.probe.startswith("passed")


def test_subsample_passes_on_iid_inputs_alone_and_fails_with_families_or_probe(mean_square):
    hack = MEAN_SQUARE_SOLUTION.replace("{stride}", "2")
    blind = evaluate(mean_square, hack, **NO_FIDELITY)
    assert blind.status is Status.CORRECT, blind.error  # the hole that families and the probe close
    families = evaluate(mean_square, hack, sensitivity_probe=False)
    assert families.status is Status.INCORRECT and "inputs)" in families.error, families.error
    probe = evaluate(mean_square, hack, input_families=())
    assert probe.status is Status.INCORRECT and "sensitivity probe" in probe.error, probe.error
    assert "the candidate's by" in probe.error and probe.accuracy.probe.startswith("failed")
    honest = evaluate(mean_square, MEAN_SQUARE_SOLUTION.replace("{stride}", "1"))
    assert honest.status is Status.CORRECT and honest.accuracy.probe.startswith("passed"), honest.error


def test_a_family_that_breaks_the_reference_is_skipped(tmp_path):
    path = tmp_path / "log_problem.py"
    path.write_text(
        textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                return torch.log(x)

        n = 4096
        SMALL_SIZES = {"n": 4096}

        def get_inputs():
            return [torch.rand(n) + 2.0]

        def get_init_inputs():
            return []
    """)
    )
    solution = textwrap.dedent("""
        import torch
        import torch.nn as nn
        import triton
        import triton.language as tl

        @triton.jit
        def _log(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(o_ptr + offs, tl.log(tl.load(x_ptr + offs, mask=m, other=1.0)), mask=m)

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                _log[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
                return out
    """)
    v = evaluate(load_problem_file(path), solution, input_families=("outliers", "alternating", "block_scale"))
    assert v.status is Status.CORRECT, v.error
    # alternating signs make log NaN: skipped with a note, the other families ran
    assert "alternating" not in v.accuracy.families and "outliers" in v.accuracy.families
    assert any("input family alternating skipped" in n for n in v.notes)


# The mean square of values close to 1: on iid get_inputs() draws it stays within tolerance of 1.0 (the
# situation of L2_07_mse_loss at its full GPU size), while the input families move it.
NEAR_CONSTANT_MEAN = textwrap.dedent('''
    """Mean of the squares of values near 1."""
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return (x * x).mean()

    n = 65536
    SMALL_SIZES = {"n": 65536}

    def get_inputs():
        return [1.0 + 1e-3 * torch.randn(n)]

    def get_init_inputs():
        return []
''')


def test_the_degeneracy_check_counts_the_input_families(tmp_path):
    from envs.problems import ProblemError

    path = tmp_path / "near_constant_mean.py"
    path.write_text(NEAR_CONSTANT_MEAN)
    problem = load_problem_file(path)
    with Evaluator(EvalSettings(device="cpu", **NO_FIDELITY)) as ev:
        with pytest.raises(ProblemError, match="does not depend on the inputs"):
            ev.validate_problems([problem])
    with Evaluator(EvalSettings(device="cpu")) as ev:
        ev.validate_problems([problem])  # a constant answer fails on the families the evaluation runs
