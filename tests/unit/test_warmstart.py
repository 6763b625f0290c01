"""The warm start's synthetic solved problems: valid problems, reproducible, kept apart from the built-in set."""

from __future__ import annotations

import ast
import re

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
