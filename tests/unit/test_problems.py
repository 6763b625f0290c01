import textwrap

import pytest

from envs.problems import (
    ProblemError,
    load_builtin,
    load_kernelbench,
    load_problem_dir,
    load_problem_file,
    load_problem_set,
    resolve_problem,
)

PROBLEM = textwrap.dedent("""
    import torch
    class Model(torch.nn.Module):
        def forward(self, x):
            return x.relu()
    n = 1 << 20
    SMALL_SIZES = {"n": 100}
    def get_inputs():
        return [torch.randn(n)]
    def get_init_inputs():
        return []
""")


def test_builtin_set_spans_levels_with_reference_solutions():
    problems = load_builtin()
    assert len(problems) >= 40
    assert {p.level for p in problems} == {0, 1, 2, 3, 4, 5}
    for p in problems:
        assert p.reference_solution, p.id
        assert p.small_sizes, f"{p.id} declares no SMALL_SIZES"
    assert len({p.id for p in problems}) == len(problems)
    assert [p.level for p in load_builtin([2])] == [2] * len(load_builtin([2]))


def test_builtin_tolerances_are_only_overridden_with_a_stated_reason():
    for p in load_builtin():
        lines = p.source.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("TOLERANCE"):
                assert lines[i - 1].lstrip().startswith("#"), f"{p.id}: TOLERANCE without a comment saying why"


def test_file_loader_parses_sizes_without_running_code(tmp_path):
    path = tmp_path / "relu.py"
    path.write_text(PROBLEM + "\nraise SystemExit('must not run')\n")
    p = load_problem_file(path)
    assert p.id == "relu" and p.small_sizes == {"n": 100} and p.level is None and p.tolerance is None
    assert len(p.sha256) == 64


def test_kernelbench_checkout_keeps_level_and_id(tmp_path):
    for level, names in {1: ["1_Square_matmul.py", "10_Relu.py", "2_Softmax.py"], 2: ["3_Conv.py"]}.items():
        d = tmp_path / "KernelBench" / f"level{level}"
        d.mkdir(parents=True)
        for name in names:
            (d / name).write_text(PROBLEM)
    problems = load_kernelbench(tmp_path)
    assert [p.id for p in problems] == [
        "kernelbench/level1/1",
        "kernelbench/level1/2",
        "kernelbench/level1/10",
        "kernelbench/level2/3",
    ]
    assert [p.level for p in problems] == [1, 1, 1, 2]
    assert [p.id for p in load_problem_set(str(tmp_path), levels=[2])] == ["kernelbench/level2/3"]


def test_directory_loader(tmp_path):
    (tmp_path / "b.py").write_text(PROBLEM)
    (tmp_path / "a.py").write_text(PROBLEM)
    (tmp_path / "_helper.py").write_text("x = 1\n")
    assert [p.id for p in load_problem_dir(tmp_path)] == ["a", "b"]


@pytest.mark.parametrize(
    "source, message",
    [
        ("x = 1\n", "not a problem file"),
        ("def f(:\n", "not valid Python"),
        (PROBLEM.replace('{"n": 100}', '{"m": 100}'), "unknown module constants"),
        (PROBLEM.replace('{"n": 100}', "dict(n=100)"), "literal dict"),
        (PROBLEM + "TOLERANCE = {'atol': -1}\n", "TOLERANCE"),
        (PROBLEM + "TOLERANCE = {'tol': 1e-3}\n", "TOLERANCE"),
    ],
)
def test_bad_problem_files_are_rejected_clearly(tmp_path, source, message):
    path = tmp_path / "p.py"
    path.write_text(source)
    with pytest.raises(ProblemError, match=message):
        load_problem_file(path)


def test_missing_and_unresolvable_inputs(tmp_path):
    with pytest.raises(ProblemError, match="no such file"):
        load_problem_file(tmp_path / "nope.py")
    with pytest.raises(ProblemError, match="no such problem"):
        resolve_problem("L9_99_nothing")
    with pytest.raises(ProblemError, match="not a KernelBench checkout"):
        load_kernelbench(tmp_path)
    assert resolve_problem("L0_02_relu").reference_solution.endswith("L0_02_relu.py")
