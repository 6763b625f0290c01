"""Static analysis, legitimate but unusual kernels: none of them is flagged."""

from __future__ import annotations

import textwrap

import pytest

from envs.antihack.static import analyze
from envs.source import canonicalize
from tests.unit.static_helpers import forward, module

LEGIT = {
    "nested_helpers": module("""
        def _grid(n, block):
            return (triton.cdiv(n, block),)

        def _run(x, out):
            def go(block):
                _copy_kernel[_grid(x.numel(), block)](x, out, x.numel(), BLOCK=block)
            go(1024)
            return out

        class ModelNew(nn.Module):
            def _launch(self, x):
                return _run(x.contiguous(), torch.empty_like(x))

            def forward(self, x):
                return self._launch(x)
    """),
    "module_level_alias": module("""
        kernel = _copy_kernel
        wrapped = triton.jit(_plain_impl)

        def _plain_impl(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
                return out
    """),
    "jit_imported_by_name": module(
        """
        import torch
        import torch.nn as nn
        import triton
        import triton.language as tl
        from triton import jit


        @jit
        def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask)
            tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                relu_kernel[(triton.cdiv(x.numel(), 512),)](x, out, x.numel(), BLOCK=512)
                return out
    """,
        header=False,
    ),
    "two_pass_reduction_several_kernels": module("""
        @triton.jit
        def _partial_sum(x_ptr, part_ptr, n, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            tl.store(part_ptr + pid, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))

        @triton.jit
        def _final_sum(part_ptr, out_ptr, m, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr, tl.sum(tl.load(part_ptr + offs, mask=offs < m, other=0.0), axis=0))

        class ModelNew(nn.Module):
            def forward(self, x):
                x = x.contiguous().view(-1)
                n = x.numel()
                block = 1024
                n_part = triton.cdiv(n, block)
                partial = torch.empty(n_part, device=x.device, dtype=torch.float32)
                out = torch.zeros((), device=x.device, dtype=torch.float32)
                _partial_sum[(n_part,)](x, partial, n, BLOCK=block)
                _final_sum[(1,)](partial, out, n_part, BLOCK=triton.next_power_of_2(n_part))
                return out
    """),
    "torch_for_allocation_and_views": forward("""
        b, c, h, w = x.shape
        x = x.permute(0, 2, 3, 1).contiguous().reshape(-1, c)
        out = x.new_empty(x.shape)
        scratch = torch.zeros_like(out).fill_(0)
        LAUNCH
        y = out.view(b, h, w, c).transpose(1, 3).transpose(2, 3)
        return y.unsqueeze(0).squeeze(0).flatten(2).unflatten(2, (h, w))
    """),
    "helper_class_holds_launch": module("""
        class _Launcher:
            def __init__(self, block):
                self.block = block

            def __call__(self, x):
                out = torch.empty_like(x)
                _copy_kernel[(triton.cdiv(x.numel(), self.block),)](x, out, x.numel(), BLOCK=self.block)
                return out

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.launch = _Launcher(256)

            def forward(self, x):
                return self.launch(x)
    """),
    "helper_module_with_parameters": module("""
        class TritonScale(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(n))

            def forward(self, x):
                out = torch.empty_like(x)
                _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
                return out

        class ModelNew(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.linear = nn.Linear(n, n)
                self.block = TritonScale(n)

            def forward(self, x):
                w = self.linear.weight.t().contiguous()
                return self.block(x) if w.numel() > 0 else self.block(x)
    """),
    "autotune_one_config": module("""
        @triton.autotune(configs=[triton.Config({"BLOCK": 1024}, num_warps=4)], key=["n"])
        @triton.jit
        def _tuned(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        class ModelNew(nn.Module):
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                out = torch.empty_like(x)
                n = x.numel()
                grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
                _tuned[grid](x, out, n)
                return out
    """),
    "shape_stride_arithmetic_and_casts": forward("""
        M, K = x.shape
        stride_m, stride_k = x.stride(0), x.stride(1)
        rows = x.size(0) * 2 // 2 + M - M
        if x.numel() == 0 or x.dim() != 2 or x.dtype == torch.float16:
            return torch.empty((M, K), device=x.device, dtype=x.dtype)
        x = x.to(torch.float32).contiguous()
        out = torch.empty((rows, K), device=x.device, dtype=torch.float32)
        block = max(16, triton.next_power_of_2(K)) * (stride_m // max(stride_k, 1) > 0)
        LAUNCH
        return out.half().float()
    """),
    "kernel_stored_on_self_and_chosen": module("""
        @triton.jit
        def _other_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

        KERNELS = {"copy": _copy_kernel, "double": _other_kernel}

        def _pick(dtype):
            return _copy_kernel if dtype == torch.float32 else _other_kernel

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.kernel = _copy_kernel

            def forward(self, x):
                out = torch.empty_like(x)
                grid = (triton.cdiv(x.numel(), 1024),)
                self.kernel[grid](x, out, x.numel(), BLOCK=1024)
                KERNELS["double"][grid](out, out, x.numel(), BLOCK=1024)
                _pick(x.dtype)[grid](out, out, x.numel(), BLOCK=1024)
                return out
    """),
    "kernel_handed_to_launcher_object": module("""
        class _Elementwise:
            def __init__(self, kernel, block):
                self.kernel, self.block = kernel, block

            def __call__(self, x):
                y = torch.empty_like(x)
                self.kernel[(triton.cdiv(x.numel(), self.block),)](x, y, x.numel(), BLOCK=self.block)
                return y

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.op = _Elementwise(_copy_kernel, 2048)

            def forward(self, x):
                return self.op(x.contiguous())
    """),
    "kernel_passed_to_generic_launcher": module("""
        def _launch(kernel, x, out, block=1024):
            kernel[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), BLOCK=block)
            return out

        class ModelNew(nn.Module):
            def forward(self, x):
                return _launch(_copy_kernel, x, torch.empty_like(x))
    """),
    "autograd_function_wrapper": module("""
        class _Copy(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                out = torch.empty_like(x)
                _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
                return out

            @staticmethod
            def backward(ctx, grad):
                return grad * 1.0

        class ModelNew(nn.Module):
            def forward(self, x):
                return _Copy.apply(x)
    """),
    "numpy_imported_for_constants": module("""
        import math
        import numpy as np

        SCALE = float(np.sqrt(2.0 / np.pi))

        class ModelNew(nn.Module):
            @torch.no_grad()
            def forward(self, x):
                n = int(np.prod(x.shape))
                scale = SCALE * math.sqrt(n) / math.sqrt(n)
                out = torch.empty_like(x)
                _copy_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
                return out
    """),
    "main_block_with_test_code": forward(
        """
        out = torch.empty_like(x)
        LAUNCH
        return out
    """,
        extra="",
    )
    + canonicalize(
        textwrap.dedent("""
        if __name__ == "__main__":
            import time
            x = torch.randn(1000)
            start = time.perf_counter()
            print(torch.allclose(ModelNew()(x), Model()(x)), time.perf_counter() - start)
    """)
    ).source,
    "kernelbench_style_wrapper": module("""
        def triton_copy(x):
            assert x.is_cuda
            x = x.contiguous()
            out = torch.empty_like(x)
            n_elements = x.numel()
            grid = lambda meta: ((n_elements + meta["BLOCK"] - 1) // meta["BLOCK"],)
            _copy_kernel[grid](x, out, n_elements, BLOCK=128)
            return out

        class ModelNew(nn.Module):
            def __init__(self) -> None:
                super().__init__()

            def forward(self, a):
                return triton_copy(a)

        batch_size = 16

        def get_inputs():
            return [torch.randn(batch_size, 4)]
    """),
    "linear_with_many_idioms": module("""
        import functools
        import math
        import operator

        NUM_SMS = torch.cuda.get_device_properties("cuda").multi_processor_count if torch.cuda.is_available() else 1
        DTYPES = {torch.float16: tl.float16, torch.float32: tl.float32}

        def get_configs():
            return [triton.Config({"BLOCK_M": bm}, num_warps=w) for bm in (64, 128) for w in (4, 8)]

        @triton.autotune(configs=get_configs(), key=["M", "N", "K"])
        @triton.heuristics({"EVEN_K": lambda args: args["K"] % 32 == 0})
        @triton.jit
        def _linear(a_ptr, w_ptr, c_ptr, b_ptr, M, N, K, OUT: tl.constexpr, EVEN_K: tl.constexpr,
                    BLOCK_M: tl.constexpr):
            offs = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
            tl.store(c_ptr + offs, tl.zeros((BLOCK_M,), dtype=tl.float32).to(OUT), mask=offs < M * N)

        class ModelNew(nn.Module):
            def __init__(self, in_features, out_features, bias=True):
                super().__init__()
                self.weight = nn.Parameter(torch.empty(out_features, in_features))
                nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
                if bias:
                    self.bias = nn.Parameter(torch.empty(out_features))
                    nn.init.uniform_(self.bias, -1 / math.sqrt(in_features), 1 / math.sqrt(in_features))
                else:
                    self.register_parameter("bias", None)
                self._grids = {}

            @staticmethod
            def _grid(M, N):
                return lambda META: (triton.cdiv(M, META["BLOCK_M"]) * N,)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                assert x.shape[-1] == self.weight.shape[1], "incompatible shapes"
                orig_dtype = x.dtype
                if x.dtype != torch.float32:
                    x = x.float()
                x2 = x.reshape(-1, x.shape[-1])
                M, K = x2.shape
                N = self.weight.shape[0]
                numel = functools.reduce(operator.mul, x.shape, 1) + math.prod(x.shape) + sum(x.shape)
                bias = self.bias if self.bias is not None else torch.empty(0, device=x.device)
                out = torch.empty((M, N), device=x.device, dtype=torch.promote_types(x.dtype, self.weight.dtype))
                if (M, N) not in self._grids:
                    self._grids[M, N] = self._grid(M, N)
                _linear[self._grids[M, N]](x2, self.weight.t(), out, bias, M, N, K, OUT=DTYPES[out.dtype])
                if self.training:
                    torch.cuda.synchronize()
                eps = torch.finfo(torch.float32).eps
                return out.reshape(*x.shape[:-1], N).to(orig_dtype)
    """),
    "empty_buffer_metadata_before_the_kernel": forward("""
        out = torch.empty_like(x)
        rows = out.shape[0]
        flat = out.view(-1)
        assert out.is_contiguous() and flat.numel() == x.numel()
        LAUNCH
        return out.view(rows, -1)
    """),
    "early_return_for_empty_input": forward("""
        if x.numel() == 0:
            return torch.empty_like(x)
        out = torch.empty_like(x)
        for t in (x, out):
            assert t.is_contiguous()
        LAUNCH
        torch.cuda.synchronize()
        return out
    """),
}


@pytest.mark.parametrize("name", list(LEGIT))
def test_legitimate_kernel_is_clean(name):
    assert analyze(LEGIT[name]) is None, name
