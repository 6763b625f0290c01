"""Model spec resolution errors and rollout engine config validation (no model is built here)."""

from __future__ import annotations

import pytest

from rl.models import ModelSpecError, RANDOM_PRESETS, check_model_dir, resolve_model, validate_model_spec
from rl.rollout import make_engine
from rl.rollout.config import CPU_GPU_MEMORY_UTILIZATION, CPU_KV_CACHE_GB, EngineConfig


def test_missing_model_path_is_a_clear_error(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelSpecError, match="does not exist") as e:
        validate_model_spec(str(missing))
    assert str(missing) in str(e.value) and "random:<preset>" in str(e.value)
    with pytest.raises(ModelSpecError, match="does not exist"):
        resolve_model(str(missing))


def test_directory_without_config_or_weights_is_refused(tmp_path):
    with pytest.raises(ModelSpecError, match="no config.json"):
        check_model_dir(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelSpecError, match="no weights"):
        check_model_dir(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert check_model_dir(tmp_path) == tmp_path.resolve()
    file = tmp_path / "config.json"
    with pytest.raises(ModelSpecError, match="not a directory"):
        check_model_dir(file)


def test_unknown_random_preset_names_the_known_ones():
    with pytest.raises(ModelSpecError, match="tiny-llama"):
        validate_model_spec("random:tiny-llamma")
    for name in RANDOM_PRESETS:
        validate_model_spec(f"random:{name}")


def test_smollm2_spec_validates_without_converting(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELRL_MODEL_CACHE", str(tmp_path))
    validate_model_spec("smollm2-135m-instruct")  # finds the GGUF in the installed package
    assert not any(tmp_path.iterdir())  # and builds nothing


def test_engine_config_refuses_unknown_keys_and_bad_values():
    with pytest.raises(ValueError, match="unknown vllm engine settings: \\['max_model_length'\\]"):
        EngineConfig.from_mapping({"kind": "vllm", "max_model_length": 1024})
    for bad in (
        {"kind": "sglang"},
        {"dtype": "fp8"},
        {"device": "tpu"},
        {"gpu_memory_utilization": 1.5},
        {"tensor_parallel_size": 0},
        {"num_engines": 0},
        {"kind": "hf", "tensor_parallel_size": 2},
        {"num_cpus": 0},
        {"kind": "openai"},
        {"kv_cache_gb": 0},
        {"kv_cache_gb": -1.0},
        {"cpu_reserved_cores": -1},
    ):
        with pytest.raises(ValueError):
            EngineConfig.from_mapping(bad)


def test_engine_config_resolves_cpu_defaults():
    c = EngineConfig.from_mapping({"kind": "vllm", "device": "cpu"})
    assert c.resolved_dtype() == "float32"
    assert c.resolved_gpu_memory_utilization() == CPU_GPU_MEMORY_UTILIZATION
    assert c.resolved_num_gpus() == 0
    assert c.resolved_kv_cache_bytes() == int(CPU_KV_CACHE_GB * (1 << 30))  # not a share of a NUMA node
    assert EngineConfig(device="cpu", kv_cache_gb=0.5).resolved_kv_cache_bytes() == 1 << 29
    g = EngineConfig(device="cuda", tensor_parallel_size=2)
    assert g.resolved_dtype() == "bfloat16" and g.resolved_num_gpus() == 2
    assert g.resolved_kv_cache_bytes() is None  # on a GPU vLLM sizes it from gpu_memory_utilization


def test_make_engine_refuses_bad_input_before_building_anything(tmp_path):
    with pytest.raises(ValueError, match="engine kind"):
        make_engine({"kind": "tgi"}, "random:tiny-llama")
    with pytest.raises(ValueError, match="unknown hf engine settings"):
        make_engine({"kind": "hf", "batch": 4}, "random:tiny-llama")
    with pytest.raises(ValueError, match="weight sync"):
        make_engine({"kind": "vllm"}, "random:tiny-llama", sync="nccl")
    with pytest.raises(ModelSpecError, match="does not exist"):
        make_engine({"kind": "vllm"}, str(tmp_path / "nope"))


def test_sample_seeds_are_distinct_and_reproducible():
    from rl.rollout.common import sample_seed

    seeds = {sample_seed(7, f"r{i}", j) for i in range(20) for j in range(8)}
    assert len(seeds) == 160
    assert sample_seed(7, "r1", 2) == sample_seed(7, "r1", 2) != sample_seed(8, "r1", 2)
    assert sample_seed(None, "r1", 2) is None
