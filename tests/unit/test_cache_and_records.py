import threading

import pytest

from envs.cache import CacheError, SqliteCache, cache_key
from envs.settings import EvalSettings, PhaseTimeouts
from envs.verdict import HackFinding, Status, Timings, TimingStats, Verdict


def test_timing_stats_from_samples():
    s = TimingStats.from_samples([3.0, 1.0, 2.0, 4.0, 5.0])
    assert (s.median_ms, s.min_ms, s.max_ms, s.runs, s.mean_ms) == (3.0, 1.0, 5.0, 5, 3.0)
    with pytest.raises(ValueError):
        TimingStats.from_samples([])


def test_verdict_round_trips_through_json_dict():
    stats = TimingStats.from_samples([1.0, 2.0])
    v = Verdict(
        Status.CORRECT,
        "p",
        "NVIDIA H200",
        timings=Timings(stats, stats, None),
        speedup=1.5,
        hack=HackFinding("noop_kernel", "r"),
        phase_seconds={"load": 0.1},
        notes=["n"],
    )
    d = v.to_dict()
    assert d["status"] == "correct" and d["correct"] is True
    assert Verdict.from_dict(d) == v


def test_cache_persists_and_is_thread_safe(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = SqliteCache(path)
    key = cache_key(problem="a", solution="b")
    assert cache.get_verdict(key) is None

    def put(i):
        cache.put_verdict(f"{key}{i}", "p", {"i": i})

    threads = [threading.Thread(target=put, args=(i,)) for i in range(20)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    cache.put_baselines("k", "p", {"eager": 1})
    cache.close()
    again = SqliteCache(path)
    assert again.count() == 20 and again.get_verdict(f"{key}7") == {"i": 7}
    assert again.get_baselines("k") == {"eager": 1}


def test_a_path_that_is_not_a_database_is_a_clear_error_and_is_left_as_it_was(tmp_path):
    """A directory, a file that is not SQLite, a path under a file: CacheError (a ValueError, so the entry points
    exit 2 naming it) instead of sqlite3's bare tracebacks, and the file keeps its bytes."""
    other = tmp_path / "notes.txt"
    other.write_bytes(b"not a database\n" * 100)
    for path, message in ((tmp_path, "unable to open"), (other, "not a database"), (other / "c.sqlite", "File exists")):
        with pytest.raises(CacheError, match=message) as e:
            SqliteCache(path)
        assert str(path) in str(e.value) and isinstance(e.value, ValueError)
    assert other.read_bytes() == b"not a database\n" * 100
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_cache_key_is_order_independent():
    assert cache_key(a=1, b={"x": 1, "y": 2}) == cache_key(b={"y": 2, "x": 1}, a=1)
    assert cache_key(a=1) != cache_key(a=2)


def test_settings_validation_and_mapping():
    with pytest.raises(ValueError, match="device"):
        EvalSettings(device="tpu")
    with pytest.raises(ValueError, match="unknown evaluation settings"):
        EvalSettings.from_mapping({"devise": "cpu"})
    s = EvalSettings.from_mapping({"device": "cpu", "timeouts": {"correctness": 5}})
    assert s.timeouts == PhaseTimeouts(correctness=5) and s.resolved_size("cpu") == "small"
    assert EvalSettings().resolved_size("cuda") == "full"


def test_pool_and_judge_configs_refuse_unknown_keys():
    from envs.antihack.judge import JudgeConfig
    from envs.pool import PoolConfig

    with pytest.raises(ValueError, match=r"unknown pool settings: \['num_actor'\]"):
        PoolConfig.from_mapping({"num_actor": 2})
    with pytest.raises(ValueError, match=r"unknown judge settings: \['modle'\]"):
        JudgeConfig.from_mapping({"modle": "gpt-5"})
    assert PoolConfig.from_mapping({"num_actors": 2}).num_actors == 2


def test_hydra_config_composes_into_settings():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from tests.conftest import ROOT

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["eval.device=cpu", "eval.timeouts.timing=7", "delta=1.5"])
    s = EvalSettings.from_mapping(OmegaConf.to_container(cfg.eval, resolve=True))
    assert s.device == "cpu" and s.timeouts.timing == 7 and cfg.delta == 1.5


def test_a_verdict_obtained_without_a_guaranteed_sandbox_is_not_served_to_a_caller_requiring_it(tmp_path):
    from envs.evaluator import Candidate, CpuStage
    from envs.problems import resolve_problem

    problem = resolve_problem("L0_02_relu")
    answer = open(problem.reference_solution).read()
    cache = SqliteCache(tmp_path / "verdicts.sqlite")
    auto = CpuStage(EvalSettings(device="cpu"), "cpu", cache)
    required = CpuStage(EvalSettings(device="cpu", sandbox="required"), "cpu", cache)
    first = auto.prepare(problem, answer)
    assert isinstance(first, Candidate)
    cache.put_verdict(first.verdict_key, problem.id, Verdict(Status.CORRECT, problem.id, "cpu").to_dict())
    assert isinstance(auto.prepare(problem, answer), Verdict)  # the old key: existing caches keep working
    pending = required.prepare(problem, answer)
    assert isinstance(pending, Candidate) and pending.verdict_key != first.verdict_key
    cache.put_verdict(pending.verdict_key, problem.id, Verdict(Status.INCORRECT, problem.id, "cpu").to_dict())
    assert required.prepare(problem, answer).status is Status.INCORRECT
    cache.close()
    cache = SqliteCache(tmp_path / "other.sqlite")  # only a sandboxed verdict: callers not requiring it use it
    cache.put_verdict(pending.verdict_key, problem.id, Verdict(Status.INCORRECT, problem.id, "cpu").to_dict())
    hit = CpuStage(EvalSettings(device="cpu", sandbox="off"), "cpu", cache).prepare(problem, answer)
    assert isinstance(hit, Verdict) and hit.cached and hit.status is Status.INCORRECT
    cache.close()


def test_a_verdict_cached_by_other_judging_code_is_not_served(tmp_path, monkeypatch):
    """Verdict keys carry a hash of the code that judges (envs/ but curation, service, tools and the built-in
    problems): a verdict from before a detector was added is evaluated again, not served."""
    import shutil

    from envs import cache as cache_module
    from envs.evaluator import Candidate, CpuStage
    from envs.problems import resolve_problem

    envs = tmp_path / "envs"
    for part in ("worker", "data"):
        (envs / part).mkdir(parents=True)
    (envs / "compare.py").write_text("RULE = 1\n")
    (envs / "worker" / "timing_phase.py").write_text("CHECKS = 1\n")
    (envs / "data" / "pipeline.py").write_text("STEP = 1\n")
    before = cache_module.judging_code_fingerprint(envs)
    (envs / "data" / "pipeline.py").write_text("STEP = 2\n")  # curation judges nothing
    cache_module.judging_code_fingerprint.cache_clear()
    assert cache_module.judging_code_fingerprint(envs) == before
    (envs / "worker" / "timing_phase.py").write_text("CHECKS = 2\n")  # a new re-check
    cache_module.judging_code_fingerprint.cache_clear()
    assert cache_module.judging_code_fingerprint(envs) != before
    shutil.copy(envs / "compare.py", envs / "worker" / "compare.py")  # a file moved elsewhere counts too
    cache_module.judging_code_fingerprint.cache_clear()
    assert len({cache_module.judging_code_fingerprint(envs), before}) == 2

    problem = resolve_problem("L0_02_relu")
    answer = open(problem.reference_solution).read()
    cache = SqliteCache(tmp_path / "verdicts.sqlite")
    stage = CpuStage(EvalSettings(device="cpu"), "cpu", cache)
    first = stage.prepare(problem, answer)
    cache.put_verdict(first.verdict_key, problem.id, Verdict(Status.CORRECT, problem.id, "cpu").to_dict())
    assert isinstance(stage.prepare(problem, answer), Verdict)  # the same code: served
    monkeypatch.setattr("envs.cpu_stage.judging_code_fingerprint", lambda: "other code")
    again = stage.prepare(problem, answer)
    assert isinstance(again, Candidate) and again.verdict_key != first.verdict_key
    cache.close()
