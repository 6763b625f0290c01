"""Static analysis, hacks where something other than the solution's Triton kernels does the work: PyTorch
(however it is spelled), kernels that never run, the reference model, fallbacks, compilers, libraries."""

from __future__ import annotations

import pytest

from tests.unit.static_helpers import assert_flagged, forward, module

HACKS = {
    # baseline_kernel: PyTorch does the work, however it is spelled
    "torch_matmul": (
        "baseline_kernel",
        forward("""
        out = torch.empty_like(x)
        LAUNCH
        return torch.matmul(x, out)
    """),
    ),
    "alias_from_import": (
        "baseline_kernel",
        forward(
            """
        out = torch.empty_like(x)
        LAUNCH
        return mm(out, x)
    """,
            extra="from torch import matmul as mm\n",
        ),
    ),
    "alias_functional_F": (
        "baseline_kernel",
        forward(
            """
        out = torch.empty_like(x)
        LAUNCH
        return F.relu(out)
    """,
            extra="import torch.nn.functional as F\n",
        ),
    ),
    "alias_from_torch_nn_import_functional": (
        "baseline_kernel",
        forward(
            """
        out = torch.empty_like(x)
        LAUNCH
        return functional.gelu(out)
    """,
            extra="from torch.nn import functional\n",
        ),
    ),
    "alias_import_torch_as_T": (
        "baseline_kernel",
        forward(
            """
        out = T.empty_like(x)
        LAUNCH
        return T.softmax(out, dim=-1)
    """,
            extra="import torch as T\n",
        ),
    ),
    # a def and a later assignment of the same name: flow-insensitively, the name may hold either
    "def_then_rebound_to_torch": (
        "baseline_kernel",
        forward(
            """
        out = torch.empty_like(x)
        LAUNCH
        return mm(out, x)
    """,
            extra="def mm(a, b):\n    return a\nmm = torch.matmul\n",
        ),
    ),
    "torch_rebound_to_itself_through_an_alias": (
        "baseline_kernel",
        forward(
            """
        out = T.empty_like(x)
        LAUNCH
        return T.matmul(out, x)
    """,
            extra="import torch as T\nT1 = T\nT = T1\n",
        ),
    ),
    "alias_module_level_function": (
        "baseline_kernel",
        forward(
            """
        out = torch.empty_like(x)
        LAUNCH
        return act(out)
    """,
            extra="act = torch.nn.functional.silu\n",
        ),
    ),
    "alias_local_variable": (
        "baseline_kernel",
        forward("""
        op = torch.sigmoid if x.dim() > 1 else torch.tanh
        out = torch.empty_like(x)
        LAUNCH
        return op(out)
    """),
    ),
    "alias_literal_getattr": (
        "baseline_kernel",
        forward("""
        out = torch.empty_like(x)
        LAUNCH
        return getattr(torch, "relu")(out)
    """),
    ),
    "alias_self_attribute": (
        "baseline_kernel",
        forward(
            """
        out = torch.empty_like(x)
        LAUNCH
        return self.act(out)
    """,
            init="self.act = torch.nn.functional.relu",
        ),
    ),
    "alias_in_container": (
        "baseline_kernel",
        forward("""
        out = torch.empty_like(x)
        LAUNCH
        for op in (torch.relu, torch.sigmoid):
            out = op(out)
        return out
    """),
    ),
    "alias_bound_method": (
        "baseline_kernel",
        forward("""
        out = torch.empty_like(x)
        LAUNCH
        act = out.relu
        return act()
    """),
    ),
    "forward_replaced_after_class": (
        "baseline_kernel",
        module("""
        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                LAUNCH
                return out

        setattr(ModelNew, "forward", lambda self, x: torch.relu(x))
    """),
    ),
    "tensor_method": (
        "baseline_kernel",
        forward("""
        out = torch.empty_like(x)
        LAUNCH
        return out.sum(dim=1)
    """),
    ),
    "matmul_operator": (
        "baseline_kernel",
        forward(
            """
        out = torch.empty_like(x)
        LAUNCH
        return out @ self.w
    """,
            init="self.w = nn.Parameter(torch.randn(4, 4))",
        ),
    ),
    "tensor_arithmetic": (
        "baseline_kernel",
        forward("""
        out = torch.empty_like(x)
        LAUNCH
        return out * (x > 0)
    """),
    ),
    "nn_module_call": (
        "baseline_kernel",
        forward(
            """
        y = self.linear(x)
        out = torch.empty_like(y)
        _copy_kernel[(1,)](y, out, y.numel(), BLOCK=1024)
        return out
    """,
            init="self.linear = nn.Linear(4, 4)",
        ),
    ),
    "nn_module_in_list": (
        "baseline_kernel",
        forward(
            """
        for layer in self.layers:
            x = layer(x)
        out = torch.empty_like(x)
        LAUNCH
        return out
    """,
            init="self.layers = nn.ModuleList([nn.Linear(4, 4), nn.ReLU()])",
        ),
    ),
    "module_passed_to_helper": (
        "baseline_kernel",
        forward(
            """
        out = torch.empty_like(x)
        LAUNCH
        return _apply(self.norm, out)
    """,
            init="self.norm = nn.LayerNorm(4)",
            extra="""
        def _apply(block, t):
            return block(t)
    """,
        ),
    ),
    "helper_does_the_work": (
        "baseline_kernel",
        forward(
            """
        out = torch.empty_like(x)
        LAUNCH
        return _finish(out)
    """,
            extra="""
        def _finish(y):
            return torch.softmax(y, dim=-1)
    """,
        ),
    ),
    "inherits_torch_forward": (
        "baseline_kernel",
        module("""
        class ModelNew(nn.Linear):
            def forward(self, x):
                out = torch.empty_like(x)
                LAUNCH
                return super().forward(out)
    """),
    ),
    "no_kernel_at_all": (
        "baseline_kernel",
        module(
            """
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, x):
                return torch.relu(x)
    """,
            header=False,
        ),
    ),
    "higher_order_call": (
        "baseline_kernel",
        forward(
            """
        out = torch.empty_like(x)
        LAUNCH
        return functools.reduce(torch.add, [out, x])
    """,
            extra="import functools\n",
        ),
    ),
    "star_import": (
        "baseline_kernel",
        module("""
        from torch import *

        class ModelNew(nn.Module):
            def forward(self, x):
                out = empty_like(x)
                LAUNCH
                return relu(out)
    """),
    ),
    "decorator_replaces_forward": (
        "baseline_kernel",
        module("""
        def fast(fn):
            def inner(self, x):
                return torch.relu(x)
            return inner

        class ModelNew(nn.Module):
            @fast
            def forward(self, x):
                out = torch.empty_like(x)
                LAUNCH
                return out
    """),
    ),
    "helper_module_does_the_work": (
        "baseline_kernel",
        module("""
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return self.fc(x)

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()

            def forward(self, x):
                out = torch.empty_like(x)
                LAUNCH
                return self.block(out)
    """),
    ),
    "forward_hook": (
        "baseline_kernel",
        module("""
        def _hook(module, inputs, output):
            return torch.relu(output)

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_forward_hook(_hook)

            def forward(self, x):
                out = torch.empty_like(x)
                LAUNCH
                return out
    """),
    ),
    "autotune_pre_hook": (
        "baseline_kernel",
        module("""
        def _pre(nargs):
            nargs["out_ptr"].copy_(torch.relu(nargs["x_ptr"]))

        @triton.autotune(configs=[triton.Config({}, pre_hook=_pre)], key=[])
        @triton.jit
        def _noop(x_ptr, out_ptr, n):
            pass

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                _noop[(1,)](x, out, x.numel())
                return out
    """),
    ),
    # kernels that never run
    "forgotten_kernel": ("forgotten_kernel", forward("return torch.relu(x)")),
    "ghost_if_false": (
        "ghost_optimization",
        forward("""
        out = torch.empty_like(x)
        if False:
            LAUNCH
        return torch.relu(x)
    """),
    ),
    "ghost_after_return": (
        "ghost_optimization",
        forward("""
        out = torch.empty_like(x)
        return torch.relu(x)
        LAUNCH
    """),
    ),
    "ghost_constant_flag": (
        "ghost_optimization",
        forward(
            """
        out = torch.empty_like(x)
        if USE_TRITON:
            LAUNCH
            return out
        return torch.relu(x)
    """,
            extra="USE_TRITON = False\n",
        ),
    ),
    "ghost_negative_size": (
        "ghost_optimization",
        forward("""
        if x.numel() < 0:
            out = torch.empty_like(x)
            LAUNCH
            return out
        return torch.relu(x)
    """),
    ),
    "ghost_while_false": (
        "ghost_optimization",
        forward("""
        out = torch.empty_like(x)
        while False:
            LAUNCH
        return out
    """),
    ),
    "ghost_uncalled_nested_function": (
        "ghost_optimization",
        forward("""
        def _go():
            out = torch.empty_like(x)
            LAUNCH
        return torch.relu(x)
    """),
    ),
    "ghost_launch_only_in_init": (
        "ghost_optimization",
        forward(
            "return torch.relu(x)",
            init="""
        x = torch.zeros(4)
        out = torch.empty_like(x)
        LAUNCH
    """,
        ),
    ),
    "ghost_unreachable_method": (
        "ghost_optimization",
        module("""
        class ModelNew(nn.Module):
            def _triton_path(self, x):
                out = torch.empty_like(x)
                LAUNCH
                return out

            def forward(self, x):
                return torch.relu(x)
    """),
    ),
    # the reference model
    "subclass_model": (
        "model_subclass",
        module("""
        class ModelNew(Model):
            def forward(self, x):
                out = torch.empty_like(x)
                LAUNCH
                return out
    """),
    ),
    "model_new_is_model": ("model_subclass", module("ModelNew = Model\n")),
    "subclass_copied_model": (
        "model_subclass",
        module("""
        class Model(nn.Module):
            def forward(self, x):
                return torch.relu(x)

        class ModelNew(Model):
            def forward(self, x):
                out = torch.empty_like(super().forward(x))
                LAUNCH
                return out
    """),
    ),
    "subclass_computed_base": (
        "model_subclass",
        module("""
        import sys

        def _base():
            for name, mod in list(sys.modules.items()):
                if hasattr(mod, "get_init_inputs"):
                    return getattr(mod, "Model")
            return nn.Module

        class ModelNew(_base()):
            pass
    """),
    ),
    "import_problem_module": (
        "model_subclass",
        forward(
            """
        out = torch.empty_like(x)
        LAUNCH
        return out
    """,
            extra="from problem import Model as Reference\n",
        ),
    ),
    # fallbacks
    "fallback_handler": (
        "fallback_handler",
        forward("""
        try:
            out = torch.empty_like(x)
            LAUNCH
            return out
        except Exception:
            return torch.nn.functional.relu(x)
    """),
    ),
    # compilers
    "torch_compile": (
        "torch_compile",
        forward(
            """
        return self.fn(x)
    """,
            init="self.fn = torch.compile(torch.relu)",
        ),
    ),
    "torch_compile_decorator_alias": (
        "torch_compile",
        module("""
        from torch import compile as fast

        class ModelNew(nn.Module):
            @fast
            def forward(self, x):
                out = torch.empty_like(x)
                LAUNCH
                return out
    """),
    ),
    "torch_jit_script": (
        "torch_compile",
        forward(
            """
        out = torch.empty_like(x)
        LAUNCH
        return torch.jit.script(_f)(out)
    """,
            extra="""
        def _f(y):
            return y
    """,
        ),
    ),
    # libraries
    "torch_ops": (
        "library_call",
        forward("""
        out = torch.empty_like(x)
        LAUNCH
        return torch.ops.aten.relu(out)
    """),
    ),
    "numpy_on_forward": (
        "library_call",
        forward(
            """
        out = torch.empty_like(x)
        LAUNCH
        return torch.from_numpy(np.maximum(out.cpu().numpy(), 0))
    """,
            extra="import numpy as np\n",
        ),
    ),
    "flash_attn": (
        "library_call",
        forward(
            """
        out = torch.empty_like(x)
        LAUNCH
        return attn(out, out, out)
    """,
            extra="from flash_attn import flash_attn_func as attn\n",
        ),
    ),
}


@pytest.mark.parametrize("name", list(HACKS))
def test_hack_is_flagged(name):
    assert_flagged(name, *HACKS[name])
