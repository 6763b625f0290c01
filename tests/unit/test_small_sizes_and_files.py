"""Static parts of the small-size derivation (envs.small_sizes) and the files policy's answer layout."""

from __future__ import annotations

import asyncio
import gzip

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

    engine = FilesEngine.from_directory(answers, [p])
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
    assert "no answer for sample 3" in samples[3].usage["error"]


def test_files_policy_errors(tmp_path):
    p = _problem(tmp_path)
    with pytest.raises(FilesPolicyError, match="no such directory"):
        FilesEngine.from_directory(tmp_path / "missing", [p])
    (tmp_path / "empty").mkdir()
    with pytest.raises(FilesPolicyError, match="holds no answer"):
        FilesEngine.from_directory(tmp_path / "empty", [p])


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


def _recorded_run(tmp_path, rows_by_step):
    """A run directory whose samples.jsonl is written the way the training loop writes it (sample_rows through
    RunLogger). `rows_by_step`: {(step, split): {problem_id: [(text, finish), ...]}}."""
    from envs.verdict import Status, Verdict
    from rl.metrics import sample_rows
    from rl.tracking import RunLogger, WandbConfig
    from rl.types import Group, ScoredSample, Sample

    logger = RunLogger(tmp_path / "run", WandbConfig(mode="disabled"))
    for (step, split), problems in rows_by_step.items():
        groups = []
        for pid, answers in problems.items():
            scored = [
                ScoredSample(
                    Sample(f"{pid}/{step}", pid, i, [1], [2, 3], text, None, finish, 0),
                    Verdict(Status.INCORRECT, pid, "cpu"),
                    0.0,
                    {},
                )
                for i, (text, finish) in enumerate(answers)
            ]
            groups.append(Group(f"{pid}/{step}", pid, scored))
        logger.samples(sample_rows(groups, step, split=split))
    logger.close()
    return tmp_path / "run"


def test_run_answers_serve_one_recorded_step(tmp_path):
    from rl.bench.policies import run_answers

    p = _problem(tmp_path)
    run = _recorded_run(
        tmp_path,
        {
            (0, "val"): {p.id: [("s0", "stop"), ("s1", "length")], "other": [("o0", "stop")]},
            (1, "train"): {"c": [("c0", "stop")]},
            (5, "val"): {p.id: [("t0", "stop")]},
        },
    )
    step, answers = run_answers(run, 0, "val")
    assert step == 0 and sorted(answers) == [p.id, "other"]
    assert [(a.text, a.finish) for a in answers[p.id]] == [("s0", "stop"), ("s1", "length")]
    assert answers[p.id][1].origin.endswith(f"step 0 val {p.id}#1")
    assert run_answers(run, "last", "val")[0] == 5 and run_answers(run, "last", "train")[1]["c"][0].text == "c0"

    packed = tmp_path / "packed"  # a run's samples kept gzipped (docs/runs/)
    packed.mkdir()
    (packed / "samples.jsonl.gz").write_bytes(gzip.compress((run / "samples.jsonl").read_bytes()))
    assert run_answers(packed, 0, "val")[1]["other"][0].text == "o0"

    engine = FilesEngine.from_run(run, "last", "val").only([p])
    assert engine.samples_for(p.id) == 1 and "step 5, val" in engine.source
    request = RolloutRequest("r", p.id, [], SamplingConfig(n=2))

    async def collect():
        return [s async for s in engine.generate([request])]

    served = asyncio.run(collect())
    assert [(s.text, s.finish_reason) for s in served] == [("t0", "stop"), ("", "error")]
    assert "no answer for sample 1" in served[1].usage["error"]


def test_run_answers_errors(tmp_path):
    from rl.bench.policies import run_answers

    p = _problem(tmp_path)
    with pytest.raises(FilesPolicyError, match=r"no samples.jsonl\(.gz\)"):
        run_answers(tmp_path / "nowhere")
    run = _recorded_run(tmp_path, {(2, "val"): {"other": [("o0", "stop")]}})
    with pytest.raises(FilesPolicyError, match=r"at step 0 \(it has steps \[2\]\)"):
        run_answers(run, 0, "val")
    with pytest.raises(FilesPolicyError, match="no samples of split 'train'"):
        run_answers(run, 0, "train")
    with pytest.raises(FilesPolicyError, match="integer step or 'last'"):
        run_answers(run, "first", "val")
    with pytest.raises(FilesPolicyError, match="answered none of the 1 problems"):
        FilesEngine.from_run(run, 2, "val").only([p])
    with (run / "samples.jsonl").open("a") as f:
        f.write("{not json\n")
    with pytest.raises(FilesPolicyError, match=r"samples.jsonl:2: not a sample row"):
        run_answers(run, 2, "val")
    (run / "samples.jsonl").write_text('{"split": "val", "step": 0, "problem_id": "x"}\n')  # no index
    with pytest.raises(FilesPolicyError, match=r"samples.jsonl:1: not a sample row"):
        run_answers(run, 0, "val")
    (run / "samples.jsonl").unlink()
    (run / "samples.jsonl.gz").write_bytes(b"not gzip")
    with pytest.raises(FilesPolicyError, match="unreadable"):
        run_answers(run, 0, "val")
