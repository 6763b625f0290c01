"""rl.data: loading, the id-hash split, the seeded resumable sampler, curricula, and bad problem sets."""

import pytest

from envs.problems import load_builtin
from rl.data import (
    CurriculumConfig,
    DataConfig,
    DataError,
    LearnabilityConfig,
    ProblemData,
    ProblemSampler,
    split_of,
)


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
    with pytest.raises(ValueError, match="data.learnability"):
        DataConfig.from_mapping({"sampler": "learnability", "learnability": {"decy": 0.5}})
    with pytest.raises(DataError, match="floor"):
        DataConfig.from_mapping({"learnability": {"floor": 0.5}})
    with pytest.raises(DataError, match="uniform, balanced or learnability"):
        DataConfig.from_mapping({"sampler": "progress"})
    config = DataConfig.from_mapping({"sampler": "learnability", "learnability": {"decay": 0.5}})
    assert config.learnability == LearnabilityConfig(decay=0.5)


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


def test_learnability_draws_the_problems_a_group_can_learn_from():
    """Problems the policy always or never solves are drawn at the floor's weight, a half-solved one at p(1 - p);
    a fresh problem counts as half-solved, so it is tried; draws within a step are distinct; a resumed sampler
    (its outcomes in the state) draws what the first one draws; peeking changes nothing."""
    problems = ProblemData.load(DataConfig(levels=(0,), validation_fraction=0.0)).train
    ids = sorted(p.id for p in problems)
    solved, unsolved, learnable = ids[0], ids[1], ids[2]
    sampler = ProblemSampler(problems, seed=3, learnability=LearnabilityConfig(decay=0.8, floor=0.02))
    for _ in range(10):
        sampler.record(solved, 8, 8)
        sampler.record(unsolved, 0, 8)
        sampler.record(learnable, 4, 8)
    n = 8 * sum(0.8**k for k in range(10))  # ten groups of 8, decayed: about 36 samples, all right (or all wrong)
    expected = (n + 1) / (n + 2) / (n + 2)  # p(1 - p) with p = (n + 1) / (n + 2)
    assert sampler.learnability_of(solved) == pytest.approx(expected)
    assert sampler.learnability_of(unsolved) == pytest.approx(expected)
    assert sampler.learnability_of(learnable) == pytest.approx(0.25)
    assert sampler.learnability_of(ids[3]) == 0.25  # never tried
    one = sampler.next_batch(1, len(problems))
    assert sorted(p.id for p in one) == ids  # distinct until the pool is used up
    counts = {i: 0 for i in ids}
    for step in range(2, 402):
        for p in sampler.next_batch(step, 1):
            counts[p.id] += 1
    assert counts[learnable] > 5 * counts[solved] and counts[learnable] > 5 * counts[unsolved]
    assert counts[solved] > 0 and counts[unsolved] > 0  # the floor keeps them in the draws

    peeked = [p.id for p in sampler.peek([500, 501], 4)]
    state = sampler.state_dict()
    resumed = ProblemSampler(problems, seed=3, learnability=LearnabilityConfig(decay=0.8, floor=0.02))
    resumed.load_state_dict(state)
    assert [p.id for p in resumed.next_batch(500, 4)] + [p.id for p in resumed.next_batch(501, 4)] == peeked
    assert [p.id for p in sampler.next_batch(500, 4)] + [p.id for p in sampler.next_batch(501, 4)] == peeked


def test_learnability_follows_what_the_policy_learns():
    """A problem that goes from never solved to always solved leaves the high weights within a few groups
    (the decay forgets), and the other samplers only count (decay 1) without changing their draws."""
    problems = ProblemData.load(DataConfig(levels=(0,), validation_fraction=0.0)).train
    sampler = ProblemSampler(problems, seed=0, learnability=LearnabilityConfig(decay=0.8))
    target = problems[0].id
    sampler.record(target, 0, 8)
    sampler.record(target, 4, 8)
    assert sampler.learnability_of(target) > 0.2  # failing, then half right: learnable
    for _ in range(6):
        sampler.record(target, 8, 8)
    assert sampler.learnability_of(target) < 0.1  # learned: drawn less than half as often as a fresh problem
    floor = ProblemSampler(problems, seed=0, learnability=LearnabilityConfig(decay=0.8, floor=0.05))
    for _ in range(10):
        floor.record(target, 8, 8)
    assert floor.learnability_of(target) == 0.05
    uniform = ProblemSampler(problems, seed=0)
    before = [p.id for p in uniform.peek([1], 5)]
    uniform.record(target, 2, 8)
    uniform.record(target, 2, 8)
    assert uniform.outcomes[target] == [4.0, 16.0] and [p.id for p in uniform.next_batch(1, 5)] == before
