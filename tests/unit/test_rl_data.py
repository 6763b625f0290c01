"""rl.data: loading, the id-hash split, the seeded resumable sampler, curricula, and bad problem sets."""

import pytest

from envs.problems import load_builtin
from rl.data import CurriculumConfig, DataConfig, DataError, ProblemData, ProblemSampler, split_of


def test_split_is_stable_and_roughly_the_fraction():
    ids = [f"p{i}" for i in range(2000)]
    held = [i for i in ids if split_of(i, 0.2, "s") == "validation"]
    assert 0.17 < len(held) / len(ids) < 0.23
    assert held == [i for i in ids if split_of(i, 0.2, "s") == "validation"]  # deterministic
    assert held != [i for i in ids if split_of(i, 0.2, "other") == "validation"]  # the salt changes it
    # growing the set never moves a problem across the split
    assert set(held) <= {i for i in ids + ["new1", "new2"] if split_of(i, 0.2, "s") == "validation"}


def test_builtin_levels_and_explicit_validation_ids():
    data = ProblemData.load(DataConfig(levels=(0, 1), validation_ids=("L0_02_relu", "L1_02_swish")))
    assert [p.id for p in data.validation] == ["L0_02_relu", "L1_02_swish"]
    assert len(data.train) == 12 and all(p.level in (0, 1) for p in data.train)
    assert not {p.id for p in data.train} & {p.id for p in data.validation}


def test_hash_split_holds_out_some_builtin_problems():
    data = ProblemData.load(DataConfig(validation_fraction=0.2))
    assert data.validation and data.train and len(data.train) + len(data.validation) == len(load_builtin())


@pytest.mark.parametrize(
    "config, message",
    [
        (DataConfig(problems="/nonexistent/set"), "data.problems"),
        (DataConfig(levels=(9,)), "no usable problems"),
        (DataConfig(levels=(0,), validation_ids=("L3_01_matmul",)), "validation_ids names problems not in"),
        (DataConfig(include_ids=("nope",)), "include_ids names problems"),
        (DataConfig(levels=(0,), include_ids=("L0_02_relu",), validation_ids=("L0_02_relu",)), "held out"),
    ],
)
def test_unusable_problem_sets_are_clear_errors(config, message):
    with pytest.raises(DataError, match=message):
        ProblemData.load(config)


def test_mapping_refuses_unknown_keys_and_bad_values():
    with pytest.raises(ValueError, match=r"unknown data settings: \['levls'\]"):
        DataConfig.from_mapping({"levls": [0]})
    with pytest.raises(ValueError, match="data.curriculum"):
        DataConfig.from_mapping({"curriculum": {"kind": "levels", "step_per_level": 3}})
    with pytest.raises(DataError, match="validation_fraction"):
        DataConfig.from_mapping({"validation_fraction": 1.5})
    config = DataConfig.from_mapping({"levels": [0, 1], "curriculum": {"kind": "levels", "steps_per_level": 3}})
    assert config.levels == (0, 1) and config.curriculum.steps_per_level == 3


def test_sampler_covers_each_epoch_and_resumes_the_exact_sequence():
    problems = ProblemData.load(DataConfig(levels=(0,), validation_fraction=0.0)).train
    sampler = ProblemSampler(problems, seed=7)
    first_epoch = [p.id for p in sampler.next_batch(1, len(problems))]
    assert sorted(first_epoch) == sorted(p.id for p in problems)  # every problem once per epoch
    sampler.next_batch(2, 3)
    state = sampler.state_dict()
    expected = [p.id for p in sampler.next_batch(3, 10)]
    resumed = ProblemSampler(list(reversed(problems)), seed=7)  # input order does not matter
    resumed.load_state_dict(state)
    assert [p.id for p in resumed.next_batch(3, 10)] == expected
    other_seed = ProblemSampler(problems, seed=8)
    assert [p.id for p in other_seed.next_batch(1, len(problems))] != first_epoch
    with pytest.raises(DataError, match="differ"):
        other_seed.load_state_dict(state)


def test_levels_curriculum_adds_a_level_every_n_steps():
    problems = ProblemData.load(DataConfig(levels=(0, 1, 2), validation_fraction=0.0)).train
    sampler = ProblemSampler(problems, CurriculumConfig(kind="levels", steps_per_level=2), seed=0)
    assert {p.level for p in sampler.pool(0)} == {0} and {p.level for p in sampler.pool(1)} == {0}
    assert {p.level for p in sampler.pool(2)} == {0, 1}
    assert {p.level for p in sampler.pool(9)} == {0, 1, 2}
    assert {p.level for p in sampler.next_batch(0, 20)} == {0}
