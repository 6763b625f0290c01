"""How a training run splits a host's GPUs between the learner, the rollout engines and the evaluation pool,
on a real Ray instance that declares logical GPUs (Ray schedules by these counts; nothing here touches CUDA).
In training the pool starts first, so with pool.num_actors null it must take only what the learner and engines
leave; where an engine started first (benchmark, agent) it takes what is free."""

import os

import pytest
import ray
from hydra import compose, initialize_config_dir

from envs.pool.config import PoolConfig
from envs.pool.ray_backend import RayBackend
from envs.settings import EvalSettings
from envs.worker.worker_set import EvaluatorError
from rl.components import training_gpus
from rl.config import RunConfig
from rl.placement import placed_group
from tests.conftest import ROOT

pytestmark = pytest.mark.integration


def run_config(*overrides) -> RunConfig:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return RunConfig.from_hydra(compose("config", overrides=list(overrides)))


@pytest.fixture
def logical_gpus(request):
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    if ray.is_initialized():
        pytest.skip("needs its own Ray instance (another test's is running in this process)")
    ray.init(num_cpus=2, num_gpus=request.param, include_dashboard=False, log_to_driver=False)
    yield request.param
    ray.shutdown()


def pool_actors(run: RunConfig | None) -> int:
    """The pool's size for `run` (None: a pool with nothing started after it, as the benchmark's and the agent's)."""
    pool = run.pool if run is not None else PoolConfig()
    backend = RayBackend(EvalSettings(device="cuda"), pool, reserve=lambda: training_gpus(run) if run else 0.0)
    try:
        return backend.default_num_actors()
    finally:
        backend.close([])


@pytest.mark.parametrize("logical_gpus", [4], indirect=True)
def test_four_gpus_learner_on_two_engine_on_one_pool_on_the_rest(logical_gpus):
    run = run_config("+experiment=multi_gpu")
    assert training_gpus(run) == 3.0  # 2 FSDP ranks x 1 GPU + one hf engine x 1 GPU
    assert pool_actors(run) == 1


@pytest.mark.parametrize("logical_gpus", [8], indirect=True)
def test_eight_gpus_leave_five_to_the_pool_and_leave_gpus_keeps_more(logical_gpus):
    assert pool_actors(run_config("+experiment=multi_gpu")) == 5
    assert pool_actors(run_config("+experiment=multi_gpu", "pool.leave_gpus=2")) == 3


@ray.remote(num_gpus=1, num_cpus=0)
class HoldsAGpu:
    def ready(self) -> bool:
        return True


@pytest.mark.parametrize("logical_gpus", [4], indirect=True)
def test_gpus_already_held_are_not_counted(logical_gpus):
    # the benchmark and the agent start their rollout engine before the pool: the pool takes what is free
    engine = HoldsAGpu.remote()
    assert ray.get(engine.ready.remote(), timeout=60)
    assert pool_actors(None) == 3
    with pytest.raises(EvaluatorError, match="the cluster has 3 free, 3 go to"):  # the train recipe does not fit now
        pool_actors(run_config("+experiment=multi_gpu"))
    ray.kill(engine)


@pytest.mark.parametrize("logical_gpus", [1], indirect=True)
def test_one_gpu_shared_through_fractions(logical_gpus):
    run = run_config("+experiment=gpu_colocated")
    assert training_gpus(run) == 0.75  # learner 0.5 + engine 0.25
    assert pool_actors(run) == 1  # one evaluation actor of 0.25
    # The multi-GPU recipe cannot fit: the pool says so before anything is loaded, and what to change.
    with pytest.raises(EvaluatorError, match=r"no GPU left for the evaluation pool: the cluster has 1 free, 3 go to"):
        pool_actors(run_config("+experiment=multi_gpu"))


@pytest.mark.parametrize("logical_gpus", [2], indirect=True)
def test_a_learner_without_explicit_gpus_takes_one_per_rank_when_the_cluster_has_them(logical_gpus):
    # the CPU default run's policy with cuda engines: the learner's actor.num_gpus is unset, so it asks for 1
    run = run_config("+policy.engine.device=cuda", "policy.engine.kind=hf")
    assert training_gpus(run) == 2.0
    with pytest.raises(EvaluatorError, match="share GPUs with fractions"):
        pool_actors(run)


def test_pool_gpu_settings_are_checked():
    with pytest.raises(ValueError, match="gpus_per_actor must be in"):
        PoolConfig(gpus_per_actor=0)
    with pytest.raises(ValueError, match="gpus_per_actor must be in"):
        PoolConfig(gpus_per_actor=1.5)
    with pytest.raises(ValueError, match="leave_gpus >= 0"):
        PoolConfig(leave_gpus=-1)


@pytest.mark.parametrize("logical_gpus", [1], indirect=True)
def test_a_group_that_cannot_be_placed_says_what_it_waits_for(logical_gpus, caplog):
    from ray.util.placement_group import placement_group_table, remove_placement_group

    fits = placed_group([{"GPU": 1}], "PACK", "one GPU", timeout=60)
    try:
        with caplog.at_level("WARNING", logger="kernelrl.placement"):
            with pytest.raises(RuntimeError, match=r"no room for two GPUs in the Ray cluster within 2 s; free"):
                placed_group([{"GPU": 2}], "PACK", "two GPUs", timeout=2, warn_after=1)
        assert "still waiting for room for two GPUs after 1 s" in caplog.text
        # the group that never fit was removed, not left pending in the cluster
        states = [g["state"] for g in placement_group_table().values()]
        assert states.count("CREATED") == 1 and "PENDING" not in states
    finally:
        remove_placement_group(fits)
