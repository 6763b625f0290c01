"""The warm start's synthetic solved problems: valid problems, reproducible, kept apart from the built-in set."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from envs.problems import load_builtin, parse_problem
from envs.source import canonicalize
from rl.warmstart.solved_problems import synthetic_solved
from rl.warmstart.stage import WarmStartConfig, fingerprint


def test_every_synthetic_pair_is_a_problem_and_a_module_defining_modelnew_with_a_kernel():
    pairs = synthetic_solved(0)
    assert len(pairs) == 48 and len({p.problem_id for p in pairs}) == 48
    for pair in pairs:
        problem = parse_problem(pair.source, pair.problem_id)
        assert problem.small_sizes  # runs at small sizes on the CPU interpreter
        tree = ast.parse(pair.solution)
        classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
        kernels = [
            n.name
            for n in tree.body
            if isinstance(n, ast.FunctionDef) and any("triton.jit" in ast.unparse(d) for d in n.decorator_list)
        ]
        assert classes == ["ModelNew"] and len(kernels) == 1, pair.problem_id
        canonicalize(pair.solution)  # what the evaluator parses


def test_the_same_seed_gives_the_same_set_and_another_seed_other_sizes():
    a, b, c = synthetic_solved(0), synthetic_solved(0), synthetic_solved(1)
    assert a == b
    assert [p.problem_id for p in a] == [p.problem_id for p in c]
    assert any(x.source != y.source or x.solution != y.solution for x, y in zip(a, c))


def test_no_synthetic_problem_computes_what_a_builtin_problem_computes():
    """Decontamination by construction: no forward expression of a built-in problem reappears here."""

    def forward_return(source: str) -> str:
        tree = ast.parse(source)
        model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
        forward = next(n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
        return re.sub(r"\s+", "", ast.unparse(forward.body[-1]))

    builtin = {forward_return(p.source) for p in load_builtin()}
    names = {p.id.split("_", 2)[-1] for p in load_builtin()}
    for pair in synthetic_solved(0):
        assert forward_return(pair.source) not in builtin, pair.problem_id
        assert pair.problem_id.split("_", 1)[-1] not in names, pair.problem_id


def test_config_refuses_unknown_keys_and_bad_values():
    with pytest.raises(ValueError, match="unknown"):
        WarmStartConfig.from_mapping({"epoch": 2})
    with pytest.raises(ValueError, match="epochs"):
        WarmStartConfig.from_mapping({"epochs": 0})
    assert WarmStartConfig.from_mapping(None).enabled is False


def test_the_cached_model_name_changes_with_anything_that_shapes_it(tmp_path):
    from rl.sft import SFTExample

    (tmp_path / "config.json").write_text("{}")
    ex = [SFTExample(messages=[{"role": "user", "content": "a"}], completion="b")]
    base = fingerprint(tmp_path, ex, WarmStartConfig())
    assert base == fingerprint(tmp_path, ex, WarmStartConfig())
    assert base != fingerprint(tmp_path, ex, WarmStartConfig(epochs=5))
    assert base != fingerprint(tmp_path, [SFTExample(ex[0].messages, "c")], WarmStartConfig())
    (tmp_path / "config.json").write_text('{"x": 1}')
    assert base != fingerprint(tmp_path, ex, WarmStartConfig())


def test_the_fingerprint_names_the_base_model_not_this_machines_path(tmp_path, monkeypatch):
    """The shipped adapter's fingerprint must be the one every machine computes: two model caches in different
    places holding the same base model give the same fingerprint."""
    from rl.sft import SFTExample

    ex = [SFTExample(messages=[{"role": "user", "content": "a"}], completion="b")]
    prints = []
    for cache in ("one", "two"):
        base = tmp_path / cache / "smollm2-135m-instruct"
        base.mkdir(parents=True)
        (base / "config.json").write_text("{}")
        monkeypatch.setenv("KERNELRL_MODEL_CACHE", str(tmp_path / cache))
        prints.append(fingerprint(base, ex, WarmStartConfig()))
    assert prints[0] == prints[1]


def test_the_fingerprint_ignores_the_converters_version(tmp_path):
    """The same model converted by two transformers versions (the H200's and the CI VM's) is one base."""
    from rl.sft import SFTExample

    ex = [SFTExample(messages=[{"role": "user", "content": "a"}], completion="b")]
    (tmp_path / "config.json").write_text('{"hidden_size": 576, "transformers_version": "5.17.0"}')
    first = fingerprint(tmp_path, ex, WarmStartConfig())
    (tmp_path / "config.json").write_text('{\n  "transformers_version": "5.19.0",\n  "hidden_size": 576\n}')
    assert fingerprint(tmp_path, ex, WarmStartConfig()) == first
    (tmp_path / "config.json").write_text('{"hidden_size": 577, "transformers_version": "5.17.0"}')
    assert fingerprint(tmp_path, ex, WarmStartConfig()) != first


def _module_class(source: str) -> tuple[type, list]:
    """A problem's `Model` class and its `get_init_inputs()` (our own synthetic or built-in source, trusted)."""
    namespace: dict = {}
    exec(compile(source, "<problem>", "exec"), namespace)
    return namespace["Model"], namespace["get_init_inputs"]()


def _unexplained(target, columns) -> float:
    """The share of `target`'s variance that a least-squares fit on `columns` leaves."""
    import torch

    basis = torch.stack(columns, 1)
    fit = torch.linalg.lstsq(basis, target.unsqueeze(1)).solution
    residual = (basis @ fit).squeeze(1) - target
    return float(residual.pow(2).sum() / (target - target.mean()).pow(2).sum().clamp_min(1e-30))


def _least_unexplained(f, lo: float = 0.1, hi: float = 10.0) -> float:
    """min over input scales a in +-[lo, hi] of f(a): a log grid, then golden-section search around the best."""
    import math

    best = math.inf
    for sign in (1.0, -1.0):
        grid = [math.exp(math.log(lo) + k * (math.log(hi) - math.log(lo)) / 40) for k in range(41)]
        values = [f(sign * a) for a in grid]
        k = min(range(41), key=values.__getitem__)
        left, right = math.log(grid[max(k - 1, 0)]), math.log(grid[min(k + 1, 40)])
        ratio = (math.sqrt(5) - 1) / 2
        for _ in range(40):
            m1, m2 = right - ratio * (right - left), left + ratio * (right - left)
            if f(sign * math.exp(m1)) < f(sign * math.exp(m2)):
                right = m2
            else:
                left = m1
        best = min(best, values[k], f(sign * math.exp((left + right) / 2)))
    return best


def test_no_synthetic_problem_is_a_constant_variant_of_a_held_out_problem():
    """Decontamination against the default validation set, measured: no one-input synthetic op is
    c0 + c1 * held_out(a * x) (+ c2 * x) for any input scale a in +-[0.1, 10] and the held-out module's parameter
    scaled around its default. The x term finds e.g. x * tanh(x) = swish(2x) - x and log(cosh(x)) = softplus(-2x) +
    x - log 2; it is left out for a positively homogeneous op (leaky_relu), where the op and x span every kink at 0
    (|x|, relu(-x)). An identity holds up to float32 rounding (a variance share near 1e-14); near-misses such as
    relu(-x) against leaky_relu(-x) at slope 0.01 leave 1e-4."""
    import torch
    from omegaconf import OmegaConf

    conf = Path(__file__).resolve().parents[2] / "conf"
    validation = set(OmegaConf.load(conf / "data" / "local_cpu.yaml").validation_ids)
    assert validation == set(OmegaConf.load(conf / "experiment" / "gpu_learning.yaml").data.validation_ids)
    held_out = [p for p in load_builtin() if p.id in validation]
    assert len(held_out) == len(validation) == 6
    torch.manual_seed(0)
    x = torch.randn(8, 600) * 2.0
    flat_x = x.double().flatten()
    variants = []  # (problem id, parameter factor, module, its output's size, positively homogeneous)
    for problem in held_out:
        model, init = _module_class(problem.source)
        default = model(*init)(x)
        homogeneous = torch.allclose(model(*init)(2.0 * x), 2.0 * default)
        scalable = any(isinstance(v, float) for v in init)
        for factor in (0.05, 0.5, 1.0, 1.5, 2.5) if scalable else (1.0,):
            module = model(*[factor * v if isinstance(v, float) else v for v in init])
            variants.append((problem.id, factor, module, default.numel(), homogeneous))
    for pair in synthetic_solved(0):
        if "def forward(self, x: torch.Tensor)" not in pair.source:
            continue  # two or three inputs: no held-out problem takes them
        model, init = _module_class(pair.source)
        ours = model(*init)(x).double().flatten()
        elementwise = ours.numel() == flat_x.numel()
        if elementwise and _unexplained(ours, [torch.ones_like(ours), flat_x]) < 1e-8:
            continue  # an affine map of x (negate, affine): every fit with an x term explains it
        for problem_id, factor, module, size, homogeneous in variants:
            if size != ours.numel():
                continue

            extra = [flat_x] if elementwise and not homogeneous else []

            def unexplained(a: float, module=module, ours=ours, extra=extra) -> float:
                theirs = module(a * x).double().flatten()
                return _unexplained(ours, [torch.ones_like(theirs), theirs, *extra])

            assert _least_unexplained(unexplained) > 1e-8, (pair.problem_id, problem_id, factor)
