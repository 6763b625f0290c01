"""scripts/eval_kernel.py and scripts/check_references.py as a user runs them: real subprocesses, CPU."""

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

RELU_SOLUTION = ROOT / "envs" / "builtin" / "solutions" / "L0_02_relu.py"
REQUIRED = {"status", "correct", "hack", "speedup", "reward", "timings", "error", "cached"}


def run(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "eval_kernel.py"), "--device", "cpu", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )


def test_pair_prints_one_json_verdict_last_and_caches(tmp_path):
    cache = tmp_path / "c.sqlite"
    answer = tmp_path / "answer.md"
    answer.write_text(f"Here is my kernel:\n```python\n{RELU_SOLUTION.read_text()}```\n")
    first = run("--problem", "L0_02_relu", "--solution", str(answer), "--cache", str(cache))
    assert first.returncode == 0, first.stderr
    verdict = json.loads(first.stdout.strip().splitlines()[-1])
    assert REQUIRED <= set(verdict)
    assert verdict["status"] == "correct" and verdict["correct"] and verdict["speedup"] is None
    assert verdict["cached"] is False and verdict["reward"] == pytest.approx(0.3100255)
    problem_file = ROOT / "envs" / "builtin" / "problems" / "L0_02_relu.py"
    second = run(
        "--problem", str(problem_file), "--solution", str(RELU_SOLUTION), "--cache", str(cache), "--delta", "1.0"
    )
    again = json.loads(second.stdout.strip().splitlines()[-1])
    assert again["cached"] is True and again["reward"] == pytest.approx(0.5)  # sigmoid(1 - 1.0)


def test_manifest_keeps_input_order_with_progress_on_stderr(tmp_path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text(RELU_SOLUTION.read_text().replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.5)"))
    manifest = tmp_path / "pairs.jsonl"
    manifest.write_text(
        "\n".join(
            json.dumps(p)
            for p in [
                {"problem": "L0_02_relu", "solution": str(RELU_SOLUTION)},
                {"problem": "L0_02_relu", "solution": "wrong.py"},  # relative to the manifest
                {"problem": "L0_04_sigmoid", "solution": str(ROOT / "envs/builtin/solutions/L0_04_sigmoid.py")},
            ]
        )
        + "\n\n"
    )
    result = run("--manifest", str(manifest), "--no-cache", "--workers", "2")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.strip().splitlines()]
    assert [(v["problem_id"], v["status"]) for v in lines] == [
        ("L0_02_relu", "correct"),
        ("L0_02_relu", "incorrect"),
        ("L0_04_sigmoid", "correct"),
    ]
    assert "3/3" in result.stderr  # the progress bar


def _bad_inputs(tmp_path):
    not_problem = tmp_path / "not_problem.py"
    not_problem.write_text("x = 1\n")
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"problem": "L0_02_relu", "solution": \n')
    missing_field = tmp_path / "missing.jsonl"
    missing_field.write_text('{"problem": "L0_02_relu"}\n')
    missing_file = tmp_path / "missing_file.jsonl"
    missing_file.write_text(json.dumps({"problem": "L0_02_relu", "solution": "nope.py"}) + "\n")
    return {
        "missing problem": (["--problem", str(tmp_path / "nope.py"), "--solution", str(RELU_SOLUTION)], "no such file"),
        "unknown id": (["--problem", "L9_99_x", "--solution", str(RELU_SOLUTION)], "no such problem"),
        "missing solution": (["--problem", "L0_02_relu", "--solution", str(tmp_path / "s.py")], "no such solution"),
        "not a problem": (["--problem", str(not_problem), "--solution", str(RELU_SOLUTION)], "not a problem file"),
        "solution is a directory": (["--problem", "L0_02_relu", "--solution", str(tmp_path)], "cannot read"),
        "unknown option": (
            ["--problem", "L0_02_relu", "--solution", str(RELU_SOLUTION), "--fast"],
            "unrecognized arguments",
        ),
        "malformed manifest": (["--manifest", str(bad_json)], "not valid JSON"),
        "manifest field": (["--manifest", str(missing_field)], '"solution"'),
        "manifest file": (["--manifest", str(missing_file)], "no such solution"),
    }


def test_bad_input_exits_2_with_a_clear_message_and_writes_nothing(tmp_path):
    cache = tmp_path / "cache.sqlite"
    for name, (args, message) in _bad_inputs(tmp_path).items():
        result = run(*args, "--cache", str(cache))
        assert result.returncode == 2, (name, result.stderr)
        assert message in result.stderr, (name, result.stderr)
        assert result.stdout == ""
        assert not cache.exists(), name


def test_unusable_solutions_get_a_compile_error_verdict_in_pair_and_manifest_mode(tmp_path):
    """The candidate's code is what is judged, not the user's input: a syntax error or a missing ModelNew is
    a compile_error verdict with reward 0, and the rest of a manifest is evaluated as usual."""
    syntax = tmp_path / "syntax.py"
    syntax.write_text(RELU_SOLUTION.read_text().replace("def forward(self, x:", "def forward(self, x,,:"))
    no_model_new = tmp_path / "no_model_new.md"
    no_model_new.write_text("```python\nimport torch\nclass Model(torch.nn.Module):\n    pass\n```\n")
    cache = tmp_path / "cache.sqlite"
    for path, message in ((syntax, "SyntaxError"), (no_model_new, "ModelNew")):
        result = run("--problem", "L0_02_relu", "--solution", str(path), "--cache", str(cache))
        assert result.returncode == 0, result.stderr
        verdict = json.loads(result.stdout.strip().splitlines()[-1])
        assert verdict["status"] == "compile_error" and verdict["reward"] == 0.0, verdict
        assert message in verdict["error"], verdict["error"]
    manifest = tmp_path / "pairs.jsonl"
    manifest.write_text(
        "\n".join(
            json.dumps({"problem": "L0_02_relu", "solution": s})
            for s in ("syntax.py", str(RELU_SOLUTION), "no_model_new.md")
        )
        + "\n"
    )
    result = run("--manifest", str(manifest), "--no-cache", "--no-progress")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.strip().splitlines()]
    assert [v["status"] for v in lines] == ["compile_error", "correct", "compile_error"]
    assert "SyntaxError" in lines[0]["error"] and "ModelNew" in lines[2]["error"]


def test_check_references_prints_the_verdict_table(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "check_references.py"),
            "eval.device=cpu",
            "levels=[0]",
            "cache_path=null",
            "progress=false",
            f"hydra.run.dir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "7/7 correct on cpu" in result.stdout
    assert "L0_07_elementwise_mul_add" in result.stdout
    rows = (tmp_path / "verdicts.jsonl").read_text().splitlines()
    assert len(rows) == 7 and all(json.loads(r)["status"] == "correct" for r in rows)


def test_a_kernelbench_problem_runs_at_derived_cpu_sizes_and_a_bad_cache_exits_2(tmp_path):
    """A problem without SMALL_SIZES at KernelBench's size (4096 x 393216 floats: 6 GiB) exhausted the CPU
    worker's memory limit, a crash verdict for a correct kernel; it now runs at sizes derived and cached as
    the benchmark derives them. A --cache that is not a database is a usage error, not a traceback."""
    problem = tmp_path / "19_ReLU.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return torch.relu(x)\n\n"
        "batch_size = 4096\ndim = 393216\n\n"
        "def get_inputs():\n    return [torch.rand(batch_size, dim)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    answer = ROOT / "tests" / "bench_answers" / "kernelbench" / "19_ReLU.py"
    cache = tmp_path / "c.sqlite"
    result = run("--problem", str(problem), "--solution", str(answer), "--cache", str(cache))
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout.strip().splitlines()[-1])
    assert verdict["status"] == "correct", verdict
    assert "sizing 1 problem(s) without SMALL_SIZES" in result.stderr
    not_a_database = tmp_path / "notes.txt"
    not_a_database.write_text("notes\n")
    bad = run("--problem", "L0_02_relu", "--solution", str(RELU_SOLUTION), "--cache", str(not_a_database))
    assert bad.returncode == 2 and bad.stdout == "", bad.stderr
    assert "cannot be used as a SQLite cache" in bad.stderr and "Traceback" not in bad.stderr
    assert not_a_database.read_text() == "notes\n"


def test_check_references_bad_settings_exit_2_not_1(tmp_path):
    """Exit 1 means a reference is not correct; a bad setting was a traceback with exit 1 too."""
    for override, message in (
        ("problems=/no/such/set", "not 'builtin'"),
        ("levels=[9]", "no problems"),
        ("eval.device=tpu", "device must be"),
        ("delta=abc", "delta must be"),
        (f"cache_path={tmp_path}", "cannot be used as a SQLite cache"),
    ):
        result = subprocess.run(
            [
                sys.executable,
                str(ROOT / "scripts" / "check_references.py"),
                override,
                f"hydra.run.dir={tmp_path / 'run'}",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
        assert result.returncode == 2, (override, result.stderr[-2000:])
        assert message in result.stderr and "Traceback" not in result.stderr, (override, result.stderr[-2000:])


def test_code_that_once_crashed_the_cpu_stage_gets_its_verdict(tmp_path):
    """A list rebuilt from its own elements recursed without end in the static analysis: it is now
    judged like any honest kernel; code past the stage's bounds is `rejected`, with the bound named."""
    forward = "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
    honest = tmp_path / "honest.py"
    honest.write_text(
        RELU_SOLUTION.read_text().replace(
            forward, forward + "        shape = list(x.shape)\n        shape = [shape[0], shape[-1]]\n"
        )
    )
    chain = tmp_path / "chain.py"
    chain.write_text(
        RELU_SOLUTION.read_text().replace(forward, forward + "        return alias300(x)\n")
        + "alias0 = torch.relu\n"
        + "".join(f"alias{i + 1} = alias{i}\n" for i in range(300))
    )
    for path, status, error in ((honest, "correct", None), (chain, "rejected", "levels deep")):
        result = run("--problem", "L0_02_relu", "--solution", str(path), "--no-cache")
        assert result.returncode == 0, result.stderr
        verdict = json.loads(result.stdout.strip().splitlines()[-1])
        assert verdict["status"] == status, verdict
        assert error is None or error in verdict["error"]
