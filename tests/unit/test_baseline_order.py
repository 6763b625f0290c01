"""The order in which the loop has baselines measured (rl/baselines.py, Trainer._prepare_baselines): validation's
problems when it validates at step 0, then the next step's draws, then the rest; the run's draws unchanged."""

from __future__ import annotations

import concurrent.futures
import logging
from pathlib import Path

import pytest

from envs import Status, Verdict
from rl.data import CurriculumConfig, DataConfig, ProblemData, ProblemSampler

CONF = Path(__file__).resolve().parents[2] / "conf"


class RecordingPool:
    """Only what the loop calls at the start: prepare_baselines (each job already done, like Evaluator's)."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str]] = []
        self.failing: tuple[str, ...] = ()
        self.cancelled: tuple[str, ...] = ()  # as a pool that closes before their turn

    def prepare_baselines(self, problems, priority="baseline"):
        problems = list(problems)
        self.calls.append(([p.id for p in problems], priority))
        futures = []
        for p in problems:
            future = concurrent.futures.Future()
            if p.id in self.cancelled:
                future.cancel()
                futures.append(future)
                continue
            status = Status.INTERNAL_ERROR if p.id in self.failing else Status.CORRECT
            seconds = {} if p.id in self.failing else {"baseline.inductor_compile": 2.0, "gpu_wait": 0.5, "total": 3.0}
            future.set_result(Verdict(status, p.id, "fake", phase_seconds=seconds))
            futures.append(future)
        return futures


def _trainer(tmp_path, pool, *overrides):
    from hydra import compose, initialize_config_dir

    from rl.config import RunConfig
    from rl.loop import Components, Trainer
    from rl.tracking import RunLogger, WandbConfig

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=["policy=tiny_random", "data.validation_fraction=0.3", *overrides])
    run = RunConfig.from_hydra(cfg)
    data = ProblemData.load(run.data)
    components = Components(pool=pool, make_engine=lambda: None, learner=None, prompts=None)
    return Trainer(run, tmp_path, components, data, RunLogger(tmp_path, WandbConfig(mode="disabled"))), run, data


def _draws(data: ProblemData, run, steps: range) -> list[str]:
    """What an untouched sampler of the same run draws for `steps`."""
    sampler = ProblemSampler(data.train, run.data.curriculum, seed=run.loop.seed, weights=data.weights)
    return [p.id for step in steps for p in sampler.next_batch(step, run.loop.problems_per_step)]


def test_validation_first_then_the_first_steps_draws_then_the_rest(tmp_path, caplog):
    pool = RecordingPool()
    trainer, run, data = _trainer(tmp_path, pool, "loop.problems_per_step=3", "validation.max_problems=4")
    pool.failing = (data.validation[-1].id,)  # one of the rest whose reference did not run
    pool.cancelled = (data.validation[4].id,)  # another of the rest, cancelled when the pool closed
    assert run.validation.at_start and len(data.validation) > 5
    with caplog.at_level(logging.INFO, logger="rl.baselines"):
        trainer._prepare_baselines()
    (needed, first_rank), (rest, rest_rank) = pool.calls
    assert first_rank == rest_rank == "baseline"
    validation = [p.id for p in data.validation[:4]]
    step1 = list(dict.fromkeys(_draws(data, run, range(1, 2))))
    assert needed == validation + step1
    everything = [p.id for p in [*data.train, *data.validation]]
    assert rest == [i for i in everything if i not in needed]  # the rest in the run's order, each once
    # the run then draws exactly what it would have drawn had nothing peeked
    assert trainer.sampler.draws == 0
    drawn = [p.id for step in (1, 2, 3) for p in trainer.sampler.next_batch(step, run.loop.problems_per_step)]
    assert drawn == _draws(data, run, range(1, 4))
    lines = [r.getMessage() for r in caplog.records]
    assert f"baselines of validation's and the first step's {len(needed)} problem(s) measured in" in lines[0]
    assert "(0 failed); per problem, s: waiting for the GPU 0.5, Inductor compile 2.0, in all 3.0" in lines[0]
    last = [m for m in lines if f"baselines of {len(everything)} problem(s) measured in" in m]
    assert len(last) == 1 and "(1 failed, 1 cancelled: the run ended first)" in last[0], lines
    # the means are over the measured jobs only
    assert "waiting for the GPU 0.5, Inductor compile 2.0, in all 3.0" in last[0]


def test_one_step_off_without_validation_at_start_and_a_resumed_run(tmp_path):
    pool = RecordingPool()
    trainer, run, data = _trainer(tmp_path, pool, "loop.mode=one_step_off", "validation.at_start=false")
    trainer._prepare_baselines()
    needed = pool.calls[0][0]
    assert needed == list(dict.fromkeys(_draws(data, run, range(1, 3))))  # both steps' draws: step 2 generates early

    pool = RecordingPool()
    trainer, run, data = _trainer(tmp_path, pool, "loop.steps=5")
    trainer.step, trainer.sampler.draws = 4, 4 * run.loop.problems_per_step  # as resume() leaves them
    trainer._prepare_baselines()
    needed = pool.calls[0][0]
    assert needed == list(dict.fromkeys(_draws(data, run, range(1, 6))[-run.loop.problems_per_step :]))
    assert trainer.sampler.draws == 4 * run.loop.problems_per_step


@pytest.mark.parametrize("weighted", [False, True])
def test_peek_leaves_the_sequence_unchanged(weighted):
    data = ProblemData.load(DataConfig(levels=(0, 1), validation_fraction=0.0))
    weights = {p.id: 1.0 + i for i, p in enumerate(data.train)} if weighted else None
    curriculum = CurriculumConfig(kind="levels", steps_per_level=2)
    peeking, plain = (ProblemSampler(data.train, curriculum, seed=3, weights=weights) for _ in range(2))
    peeking.next_batch(1, 5)
    plain.next_batch(1, 5)
    ahead = peeking.peek(range(2, 5), 4)
    assert peeking.draws == plain.draws == 5
    assert ahead == [p for step in range(2, 5) for p in plain.next_batch(step, 4)]
    assert [p for step in range(2, 5) for p in peeking.next_batch(step, 4)] == ahead
