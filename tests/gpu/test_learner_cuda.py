"""The learner on a CUDA device: packed bf16 logprobs, a LoRA and a full step, export. Run on a GPU."""

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("peft")

from rl.learner.config import AlgorithmConfig, LoraSettings, OptimizerSettings, PolicyConfig  # noqa: E402
from rl.learner.logprobs import completion_logprobs, pack_rows  # noqa: E402
from rl.learner.policy import Policy  # noqa: E402
from rl.learner.random_models import tiny_llama  # noqa: E402
from rl.types import TrainBatch  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.integration]


def _rows(n=6, vocab=128):
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, vocab, (40 + 7 * i,), generator=g).tolist() for i in range(n)], [8] * n


@pytest.mark.parametrize("layout", ["packed", "padded"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_laid_out_logprobs_match_one_sequence_at_a_time_on_cuda(dtype, layout):
    model = tiny_llama().to("cuda", dtype).eval()
    ids, plens = _rows()
    with torch.no_grad():
        packed = pack_rows(ids, plens, list(range(len(ids))), "cuda", layout)
        together, _ = completion_logprobs(model, packed)
        for row in range(len(ids)):
            alone, _ = completion_logprobs(model, pack_rows(ids, plens, [row], "cuda"))
            got = together[packed.seq_index == row]
            assert torch.allclose(got, alone, atol=1e-4 if dtype == torch.float32 else 5e-2), row


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_a_step_and_a_merged_export_on_cuda(finetune, tmp_path):
    ids, plens = _rows()
    batch = TrainBatch(ids, plens, [1.0, -1.0] * 3, [None] * 6, ["g"] * 6, 0)
    policy = Policy(
        PolicyConfig(
            device="cuda",
            dtype="bfloat16",
            finetune=finetune,
            lora=LoraSettings(r=4, alpha=8),
            optimizer=OptimizerSettings(lr=1e-3),
            micro_batch_tokens=128,
        ),
        AlgorithmConfig(kl_coef=0.01),
        model=tiny_llama(),
    )
    metrics = policy.train_step(batch)
    assert metrics["grad_norm"] > 0 and torch.isfinite(torch.tensor(metrics["loss"]))
    # the step's peak on the learner's GPU (verl's perf/max_memory_allocated_gb through rl.metrics.VERL_ALIASES)
    assert 0 < metrics["max_memory_allocated_gb"] <= metrics["max_memory_reserved_gb"]
    update = policy.export_weights("merged", str(tmp_path / "merged"))
    assert update.seconds > 0 and (tmp_path / "merged" / "model.safetensors").is_file()


def _group_batch():
    """Two GRPO groups of 4 rows (each group shares its prompt) with completions of different lengths."""
    g = torch.Generator().manual_seed(1)
    rand = lambda n: torch.randint(0, 128, (n,), generator=g).tolist()  # noqa: E731
    prompts = [rand(30), rand(23)]
    ids, plens, groups = [], [], []
    for k, prompt in enumerate(prompts):
        for n in (3, 9, 14, 6):
            ids.append(prompt + rand(n))
            plens.append(len(prompt))
            groups.append(f"g{k}")
    return TrainBatch(ids, plens, [1.0, -1.0, 0.5, -0.5] * 2, [None] * 8, groups, 0)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_prefix_layout_equals_padded_on_cuda(dtype):
    """The shared-prompt layout's KV-cache path on this machine's transformers and CUDA kernels."""
    batch = _group_batch()
    logprobs, states, norms = {}, {}, {}
    for layout in ("padded", "prefix"):
        cfg = PolicyConfig(
            device="cuda",
            dtype=dtype,
            lora=LoraSettings(r=4, alpha=8),
            optimizer=OptimizerSettings(lr=1e-2, eps=1.0),
            layout=layout,
            micro_batch_tokens=96,  # several micro-batches, one group split over two
        )
        policy = Policy(cfg, AlgorithmConfig(), model=tiny_llama())
        logprobs[layout] = policy.logprobs(batch.input_ids, batch.prompt_lengths)
        norms[layout] = policy.train_step(batch)["grad_norm"]
        states[layout] = {k: v.detach().float().cpu() for k, v in policy.trainable_state().items()}
    tol = 1e-4 if dtype == "float32" else 5e-2
    for a, b in zip(logprobs["padded"], logprobs["prefix"]):
        assert a == pytest.approx(b, abs=tol)
    assert norms["prefix"] == pytest.approx(norms["padded"], rel=1e-3 if dtype == "float32" else 5e-2)
    if dtype == "float32":
        for name, p in states["padded"].items():
            assert torch.allclose(states["prefix"][name], p, atol=1e-6, rtol=1e-4), name


def test_a_step_gives_its_activations_back_to_the_driver():
    """What a step allocated and freed is not kept in the learner's cache, where a colocated engine and
    evaluation workers could not use it between steps."""
    g = torch.Generator().manual_seed(2)
    ids = [torch.randint(0, 128, (3000,), generator=g).tolist() for _ in range(4)]
    batch = TrainBatch(ids, [8] * 4, [1.0, -1.0, 1.0, -1.0], [None] * 4, ["g"] * 4, 0)
    policy = Policy(
        PolicyConfig(device="cuda", dtype="float32", finetune="full", micro_batch_tokens=16384),
        AlgorithmConfig(),
        model=tiny_llama(),
    )
    metrics = policy.train_step(batch)
    kept_gb = torch.cuda.memory_reserved() / 2**30
    assert kept_gb < 0.5 * metrics["max_memory_reserved_gb"], (kept_gb, metrics["max_memory_reserved_gb"])
