"""Full-weight broadcast (rl.rollout.broadcast) from an FSDP2 learner into an hf engine in another process, no Ray
(what the GPU image runs): the learner at world size 1 in this process, the engine in a spawned one, gloo
between them (on one GPU too: NCCL refuses two ranks on one device). On CPU always, on CUDA when there is one.

The engine process writes what it received to a file: tensors put on a multiprocessing queue travel as file
descriptors that the receiver fetches from the sender's process, so a child that exits after `put` makes the
parent's `get` fail (FileNotFoundError on the sender's resource-sharer socket: the session-4 GPU failure).
"""

from __future__ import annotations

import multiprocessing as mp
import traceback

import pytest
import torch

pytest.importorskip("transformers")

from rl.learner.config import AlgorithmConfig, OptimizerSettings, PolicyConfig  # noqa: E402
from rl.learner.random_models import byte_tokenizer, tiny_llama  # noqa: E402
from rl.types import TrainBatch  # noqa: E402

pytestmark = pytest.mark.integration


def _engine_process(model_dir: str, device: str, spec: dict, out_path: str, queue) -> None:
    """The hf engine joins the channel as rank 1, receives one broadcast, and saves the weights it serves."""
    try:
        from rl.rollout.config import EngineConfig
        from rl.rollout.hf_engine import HFEngine

        engine = HFEngine(model_dir, EngineConfig(kind="hf", device=device, dtype="float32"))
        engine.open_weight_channel(spec, 1)
        engine.receive_weights()
        torch.save({k: v.detach().cpu() for k, v in engine.model.state_dict().items()}, out_path)
        queue.put(("ok", engine.version))
    except BaseException:  # the parent reports it: a child's traceback is otherwise lost in its stderr
        queue.put(("error", traceback.format_exc()))


def test_broadcast_from_the_sharded_learner_into_an_hf_engine_process(group, tmp_path):
    from rl.learner.full_state import serving_state_dict
    from rl.learner.network import free_port
    from rl.learner.sharded import ShardedPolicy
    from rl.rollout.broadcast import ChannelSpec, open_channel, send

    device = group
    model = tiny_llama(vocab_size=259)
    model.save_pretrained(tmp_path / "model")
    byte_tokenizer().save_pretrained(tmp_path / "model")
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    policy = ShardedPolicy(
        PolicyConfig(
            device=device,
            finetune="full",
            dtype="float32",
            micro_batch_tokens=128,
            optimizer=OptimizerSettings(lr=1e-3),
        ),
        AlgorithmConfig(),
        model=model,
    )
    g = torch.Generator().manual_seed(1)
    ids = [torch.randint(0, 259, (30,), generator=g).tolist() for _ in range(4)]
    policy.train_step(
        TrainBatch(
            input_ids=ids,
            prompt_lengths=[5] * 4,
            advantages=[1.0, -1.0] * 2,
            rollout_logprobs=[None] * 4,
            group_ids=["g"] * 4,
            policy_version=0,
        )
    )
    state = serving_state_dict(policy.net, policy.config, cpu=False, rank0_only=False, is_rank0=True)
    assert any(not torch.equal(state[k].cpu(), initial[k]) for k in state)  # the engine's file is now stale

    spec = ChannelSpec("127.0.0.1", free_port(), 2, "gloo", timeout_s=180)  # gloo: also two processes on one GPU
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    out_path = str(tmp_path / "received.pt")
    proc = ctx.Process(target=_engine_process, args=(str(tmp_path / "model"), device, spec.__dict__, out_path, queue))
    proc.start()
    try:
        stats = send(open_channel(spec, 0), state, policy.version)
        status, detail = queue.get(timeout=180)
    finally:
        proc.join(timeout=60)
        if proc.is_alive():
            proc.kill()
    assert status == "ok", detail
    assert detail == policy.version == 1
    assert stats["bytes"] == sum(v.numel() * v.element_size() for v in state.values())
    received = torch.load(out_path, weights_only=True)
    for name, value in state.items():
        assert torch.equal(received[name], value.cpu()), name
