"""The comparison's float32 pass as one Triton kernel (envs/fused_compare.py), run by Triton's interpreter on the
CPU: the same answers as the torch pass it replaces on a GPU. Its GPU twin is tests/gpu/test_compare_cuda.py."""

import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]

# Run in a child: the interpreter must be chosen before Triton decorates the kernel.
CHILD = r"""
import math
import torch
from envs import compare, fused_compare
from tests.unit.test_compare import _near_bound_outputs

fused_compare.MAX_PROGRAMS = 2  # several strides per program: a late one decides
M = compare._FLOAT32_MARGIN
g = torch.Generator().manual_seed(0)
cases = 0
for dtype in (torch.float32, torch.float16):  # the interpreter gets bfloat16 wrong
    for trial in range(40):
        atol, rtol = [(1e-4, 1e-4), (1e-2, 1e-2), (1e-6, 0.0), (1e-3, 0.5)][trial % 4]
        n = [1, 7, 1000, 5000, 4096 + 3][trial % 5]
        ref = (torch.randn(n, generator=g) * 10.0 ** (trial % 5 - 2)).to(dtype)
        out = ref + (torch.randn(n, generator=g) * atol * 0.3).to(dtype)
        kind = trial % 8
        if kind == 1:  # a few elements at their bound, rounding either way
            idx = torch.randint(0, n, (3,), generator=g)
            out[idx] = _near_bound_outputs(ref[idx], atol, rtol)
        elif kind == 2:  # one clear miss, last
            out[-1] += 1.0
        elif kind in (3, 4, 5):  # NaN or an infinity in the output, anywhere
            out[int(torch.randint(0, n, (1,), generator=g))] = [math.nan, math.inf, -math.inf][kind - 3]
        elif kind == 6:  # ... or in the reference
            ref[n // 2] = math.inf
        want = compare._clearly_inside_in_chunks(ref, out, atol * M, rtol * M)
        got = fused_compare.clearly_inside_fused(ref, out, atol * M, rtol * M)
        if want is None or got is None:
            assert want is None and got is None, (dtype, trial, want, got)
        else:
            assert got[0] == want[0], (dtype, trial, got, want)  # the largest difference, exactly
            assert math.isclose(got[1], want[1], rel_tol=1e-12, abs_tol=1e-300), (dtype, trial, got, want)
        cases += want is not None
assert cases >= 12, cases  # the clean trials were settled (both passes agreeing on all 80)
assert fused_compare.clearly_inside_fused(torch.empty(0), torch.empty(0), 1e-4, 1e-4) == (0.0, 0.0)


class Idle:  # a launch that runs nothing (a kernel swapped for a fake): its results are never read as inside
    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


fused_compare._inside_partials = Idle()
same = torch.ones(100)
assert fused_compare.clearly_inside_fused(same, same.clone(), 1e-4, 1e-4) is None
print("ok")
"""


def test_the_fused_pass_gives_the_torch_pass_answers_in_triton_s_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_only_dense_float32_gpu_tensors_take_the_prepared_fused_pass(monkeypatch):
    from envs import fused_compare

    class OnGpu:  # the checks a CUDA tensor meets, without a GPU
        def __init__(self, dtype=torch.float32, dense=True, device="cuda:0", numel=8):
            self.is_cuda, self.dtype, self.device, self.dense, self.n = True, dtype, torch.device(device), dense, numel

        def is_contiguous(self):
            return self.dense

        def numel(self):
            return self.n

    assert not fused_compare.eligible(OnGpu(), OnGpu())  # not prepared (the CPU, or a kernel that did not compile)
    monkeypatch.setattr(fused_compare, "_BINARY", object())
    assert fused_compare.eligible(OnGpu(), OnGpu())
    x = torch.ones(8)
    assert not fused_compare.eligible(x, x)  # the CPU keeps the torch pass (and its verdicts)
    assert not fused_compare.eligible(OnGpu(), OnGpu(dense=False))  # a strided view: the kernel reads densely
    assert not fused_compare.eligible(OnGpu(torch.float16), OnGpu(torch.float16))  # not prepared: the torch pass
    assert not fused_compare.eligible(OnGpu(), OnGpu(torch.float16))
    assert not fused_compare.eligible(OnGpu(), OnGpu(device="cuda:1"))
    assert not fused_compare.eligible(OnGpu(numel=1 << 31), OnGpu(numel=1 << 31))  # int32 offsets and counts


def test_a_launch_through_anything_but_what_prepare_left_settles_nothing(monkeypatch):
    """A launch returns the binary it ran; one other than `prepare`'s (swapped into Triton's in-memory cache by
    code that ran since), or one reached through an attribute or a launch hook set since, leaves the output to
    the float64 path."""
    import triton

    from envs import fused_compare

    class Binary:
        pass

    prepared, other = Binary(), Binary()
    ran = iter([prepared, other] + [prepared] * 4)

    class Launches:  # each launch writes a clean result
        def __getitem__(self, grid):
            def launch(ref, out, n, rtol_in, atol_in, partials, BLOCK):
                partials.zero_()
                return next(ran)

            return launch

    kernel = Launches()
    monkeypatch.setattr(fused_compare, "_inside_partials", kernel)
    monkeypatch.setattr(fused_compare, "_BINARY", prepared)
    monkeypatch.setattr(fused_compare, "_FINGERPRINT", fused_compare._fingerprint())
    x = torch.ones(100)
    assert fused_compare.clearly_inside_fused(x, x, 1e-4, 1e-4) == (0.0, 0.0)
    assert fused_compare.clearly_inside_fused(x, x, 1e-4, 1e-4) is None  # another binary ran
    prepared._run = lambda *args: None  # a launcher of one's own on the prepared binary
    assert fused_compare.clearly_inside_fused(x, x, 1e-4, 1e-4) is None
    del prepared._run
    hook = triton.knobs.runtime.launch_exit_hook  # a chain of hooks, or None, by Triton's version
    monkeypatch.setattr(triton.knobs.runtime, "launch_exit_hook", lambda *args: None)
    assert fused_compare.clearly_inside_fused(x, x, 1e-4, 1e-4) is None
    if hasattr(hook, "add"):  # a hook added to the chain
        monkeypatch.setattr(triton.knobs.runtime, "launch_exit_hook", hook)
        extra = lambda *args: None  # noqa: E731
        hook.add(extra)
        assert fused_compare.clearly_inside_fused(x, x, 1e-4, 1e-4) is None
        hook.remove(extra)
    monkeypatch.setattr(triton.knobs.runtime, "launch_exit_hook", hook)
    assert fused_compare.clearly_inside_fused(x, x, 1e-4, 1e-4) == (0.0, 0.0)  # as prepared again
