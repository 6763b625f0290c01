"""scripts/eval_kernel.py's input handling, without evaluating: manifest paths, solution bytes, CPU sizes."""

import json

import pytest

from envs.problems import load_problem_file, resolve_problem
from envs.small_sizes import needs_small_sizes
from scripts import eval_kernel
from tests.conftest import ROOT


SIGMOID = ROOT / "envs" / "builtin" / "solutions" / "L0_04_sigmoid.py"
KERNELBENCH_STYLE = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

batch_size = {batch}
dim = {dim}

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
"""


def _manifest(directory, *entries):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "pairs.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def test_manifest_paths_are_relative_to_the_manifest_never_the_working_directory(tmp_path, monkeypatch):
    """A file the manifest names but that is missing beside it is an error naming where the manifest points, even
    when the working directory holds a file of that name (which was judged in its place)."""
    cwd = tmp_path / "cwd"
    (cwd / "problems").mkdir(parents=True)
    (cwd / "sig.py").write_text(SIGMOID.read_text())
    (cwd / "problems" / "p.py").write_text(KERNELBENCH_STYLE.format(batch=8, dim=8))
    monkeypatch.chdir(cwd)
    here = tmp_path / "m"
    with pytest.raises(eval_kernel.BadInput, match=f"{here / 'sig.py'}: no such solution file"):
        eval_kernel.load_manifest(_manifest(here, {"problem": "L0_04_sigmoid", "solution": "sig.py"}))
    with pytest.raises(eval_kernel.BadInput, match=str(here / "problems" / "p.py")):
        eval_kernel.load_manifest(_manifest(here, {"problem": "problems/p.py", "solution": str(SIGMOID)}))
    (here / "sig.py").write_text("# beside the manifest\n")
    (here / "problems").mkdir()
    (here / "problems" / "p.py").write_text(KERNELBENCH_STYLE.format(batch=8, dim=16))
    pairs = eval_kernel.load_manifest(
        _manifest(
            here,
            {"problem": "L0_04_sigmoid", "solution": "sig.py"},
            {"problem": "problems/p.py", "solution": str(SIGMOID)},
        )
    )
    assert [(p.id, p.path) for p, _ in pairs] == [
        ("L0_04_sigmoid", resolve_problem("L0_04_sigmoid").path),
        ("p", str(here / "problems" / "p.py")),
    ]
    assert pairs[0][1] == "# beside the manifest\n" and "dim = 16" in pairs[1][0].source


def test_a_solution_that_is_not_utf8_is_judged_not_refused(tmp_path):
    """What a solution file holds is never a usage error: undecodable bytes become U+FFFD and the CPU stage
    judges the result (here compile_error), so one such answer does not stop a manifest."""
    garbage = tmp_path / "garbage.py"
    garbage.write_bytes(b"\xb6\x00\xff import torch\n")
    text = eval_kernel._load_solution(garbage)
    assert text.startswith("\ufffd\x00\ufffd import torch")
    with pytest.raises(eval_kernel.BadInput, match="cannot read"):
        eval_kernel._load_solution(tmp_path)  # a directory is still a usage error


def test_only_large_problems_without_small_sizes_get_derived_cpu_sizes(tmp_path):
    def problem(text):
        path = tmp_path / f"p{abs(hash(text))}.py"
        path.write_text(text)
        return load_problem_file(path)

    assert needs_small_sizes(problem(KERNELBENCH_STYLE.format(batch=4096, dim=393216)))
    assert not needs_small_sizes(problem(KERNELBENCH_STYLE.format(batch=8, dim=1000)))  # small already
    assert not needs_small_sizes(
        problem(
            KERNELBENCH_STYLE.format(batch=8, dim=8).replace("torch.rand(batch_size, dim)", "torch.rand(4096, 4096)")
        )
    )  # nothing to scale: runs as written
    assert not needs_small_sizes(resolve_problem("L0_02_relu"))  # has SMALL_SIZES
