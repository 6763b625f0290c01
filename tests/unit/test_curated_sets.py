"""Curated sets as training data: the loader reads levels from the manifest, data.sampler=balanced draws by
its weights, reproducibly and resumably (envs.data.problem_set, rl.data)."""

from __future__ import annotations

import collections
import json

import pytest

from envs.problems import ProblemError, load_builtin, load_problem_set
from rl.data import DataConfig, DataError, ProblemData, ProblemSampler


def _curated(tmp_path, weights: dict[str, float]):
    problems = {p.id: p for p in load_builtin()}
    lines = []
    for i, (pid, w) in enumerate(weights.items()):
        (tmp_path / f"{pid}_c.py").write_text(problems[pid].source)
        lines.append(json.dumps({"id": f"{pid}_c", "level": i % 6, "weight": w}))
    (tmp_path / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_levels_come_from_the_manifest(tmp_path):
    d = _curated(tmp_path, {"L0_01_vector_add": 1.0, "L2_01_softmax": 1.0, "L3_01_matmul": 1.0})
    loaded = {p.id: p.level for p in load_problem_set(str(d))}
    assert loaded == {"L0_01_vector_add_c": 0, "L2_01_softmax_c": 1, "L3_01_matmul_c": 2}
    assert [p.id for p in load_problem_set(str(d), levels=[1])] == ["L2_01_softmax_c"]


def test_a_file_missing_from_the_manifest_is_an_error(tmp_path):
    d = _curated(tmp_path, {"L0_01_vector_add": 1.0})
    (d / "stray.py").write_text(load_builtin()[1].source)
    with pytest.raises(ProblemError, match="stray.py is not in manifest.jsonl"):
        load_problem_set(str(d))


def test_balanced_sampler_follows_the_weights_and_resumes(tmp_path):
    d = _curated(tmp_path, {"L0_01_vector_add": 8.0, "L2_01_softmax": 1.0, "L3_01_matmul": 1.0})
    data = ProblemData.load(DataConfig(problems=str(d), sampler="balanced", validation_fraction=0.0))
    assert data.weights == {"L0_01_vector_add_c": 8.0, "L2_01_softmax_c": 1.0, "L3_01_matmul_c": 1.0}
    sampler = ProblemSampler(data.train, seed=1, weights=data.weights)
    draws = [p.id for p in sampler.next_batch(0, 2000)]
    share = collections.Counter(draws)["L0_01_vector_add_c"] / len(draws)
    assert 0.75 < share < 0.85  # 8 / 10
    again = ProblemSampler(data.train, seed=1, weights=data.weights)
    again.next_batch(0, 1000)
    state = again.state_dict()
    resumed = ProblemSampler(data.train, seed=1, weights=data.weights)
    resumed.load_state_dict(state)
    assert [p.id for p in resumed.next_batch(0, 1000)] == draws[1000:]


def test_balanced_needs_a_curated_set():
    with pytest.raises(DataError, match="needs a curated set"):
        ProblemData.load(DataConfig(problems="builtin", sampler="balanced"))
    with pytest.raises(DataError, match="uniform, balanced or learnability"):
        DataConfig(sampler="weighted")
