"""Static parts of the small-size derivation (envs.small_sizes) and the files policy's answer layout."""

from __future__ import annotations

import asyncio

import pytest

from envs.problems import parse_problem
from envs.small_sizes import estimate_elements, scalable_constants, scaled_sizes
from rl.bench.policies import FilesEngine, FilesPolicyError, answer_files
from rl.types import RolloutRequest, SamplingConfig

SOURCE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x

batch_size = 128
in_channels = 3
out_channels = 24
num_groups = 8
D, H, W = 24, 32, 32
N = 2048 * 2
kernel_size = 3
bias_shape = (out_channels, 1, 1)
eps = 1e-5

def get_inputs():
    return [torch.rand(batch_size, in_channels, D, H, W), torch.randint(0, 10, (batch_size, N)), torch.randn(N)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups, bias_shape]
"""


def test_scalable_constants_are_integer_literals_of_at_least_min_scaled():
    assert scalable_constants(SOURCE) == {"batch_size": 128, "out_channels": 24, "D": 24, "H": 32, "W": 32, "N": 4096}


def test_halving_keeps_group_multiples_and_recomputes_dependents():
    assert scaled_sizes(SOURCE, 0) == {}
    s1 = scaled_sizes(SOURCE, 1)
    assert s1 == {
        "batch_size": 64,
        "out_channels": 16,
        "D": 16,
        "H": 16,
        "W": 16,
        "N": 2048,
        "bias_shape": (16, 1, 1),
    }  # 24 / 2 = 12 rounds up to a multiple of num_groups = 8
    s3 = scaled_sizes(SOURCE, 3)
    # conservative: every size num_groups divides stays a multiple of it (which one GroupNorm sees is unknown)
    assert s3["out_channels"] == 8 and s3["bias_shape"] == (8, 1, 1) and s3["H"] == 8 and s3["batch_size"] == 16
    assert scaled_sizes(SOURCE, 30)["batch_size"] == 8  # the group multiple (8) is the floor here
    assert scaled_sizes(SOURCE.replace("num_groups = 8", "num_groups = 3"), 30)["batch_size"] == 4  # min_value
    assert "kernel_size" not in scaled_sizes(SOURCE, 30) and "in_channels" not in scaled_sizes(SOURCE, 30)


def test_estimate_elements_takes_the_largest_input():
    assert estimate_elements(SOURCE) == 128 * 3 * 24 * 32 * 32  # > randint's (128, 4096) and randn(4096)
    small = scaled_sizes(SOURCE, 3)
    assert estimate_elements(SOURCE, small) == 16 * 3 * 8 * 8 * 8


def test_estimate_elements_unknown_shapes():
    src = SOURCE.replace("torch.randn(N)", "torch.randn(make_shape())")
    assert estimate_elements(src) == 128 * 3 * 24 * 32 * 32  # the known calls decide
    assert estimate_elements("def get_inputs():\n    return [torch.rand(make_shape())]\n") is None
    assert estimate_elements(SOURCE.replace("def get_inputs", "def other_inputs")) is None


def _problem(tmp_path, stem="L0_99_thing"):
    path = tmp_path / "problems" / f"{stem}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(SOURCE)
    return parse_problem(SOURCE, stem, str(path))


def test_files_layouts(tmp_path):
    p = _problem(tmp_path)
    answers = tmp_path / "answers"
    answers.mkdir()
    assert answer_files(answers, p) == []
    (answers / "L0_99_thing.md").write_text("one")
    assert [f.name for f in answer_files(answers, p)] == ["L0_99_thing.md"]
    (answers / "L0_99_thing.py").write_text("two")
    with pytest.raises(FilesPolicyError, match="two answers"):
        answer_files(answers, p)
    (answers / "L0_99_thing.py").unlink()
    (answers / "L0_99_thing").mkdir()
    (answers / "L0_99_thing" / "0.py").write_text("s0")
    with pytest.raises(FilesPolicyError, match="keep one"):
        answer_files(answers, p)
    (answers / "L0_99_thing.md").unlink()
    for name, text in [("10.md", "s10"), ("2.py", "s2"), ("notes.txt", "x"), ("x.py", "x")]:
        (answers / "L0_99_thing" / name).write_text(text)
    assert [f.name for f in answer_files(answers, p)] == ["0.py", "2.py", "10.md"]  # numeric order

    engine = FilesEngine(answers, [p])
    request = RolloutRequest("r", p.id, [], SamplingConfig(n=4))

    async def collect():
        return [s async for s in engine.generate([request])]

    samples = asyncio.run(collect())
    assert [(s.index, s.text, s.finish_reason) for s in samples] == [
        (0, "s0", "stop"),
        (1, "s2", "stop"),
        (2, "s10", "stop"),
        (3, "", "error"),
    ]
    assert "no answer file" in samples[3].usage["error"]


def test_files_policy_errors(tmp_path):
    p = _problem(tmp_path)
    with pytest.raises(FilesPolicyError, match="no such directory"):
        FilesEngine(tmp_path / "missing", [p])
    (tmp_path / "empty").mkdir()
    with pytest.raises(FilesPolicyError, match="holds no answer"):
        FilesEngine(tmp_path / "empty", [p])


def test_tuple_shapes_and_starred_arguments_scale():
    src = """
import torch
class Model(torch.nn.Module):
    pass
batch_size = 32768
input_shape = (32768, 3)
dim = 1
def get_inputs():
    x = torch.rand(batch_size, *input_shape)
    return [x, torch.randint(0, 2, x.shape)]
def get_init_inputs():
    return [dim]
"""
    assert scalable_constants(src) == {"batch_size": 32768, "input_shape": (32768, 3)}
    assert scaled_sizes(src, 8) == {"batch_size": 128, "input_shape": (128, 3)}  # 3 < min_scaled stays
    assert estimate_elements(src) == 32768 * 32768 * 3  # x.shape is not literal: the rand call decides
    assert estimate_elements(src, scaled_sizes(src, 8)) == 128 * 128 * 3
