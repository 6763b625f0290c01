"""A vLLM worker extension (`worker_extension_cls`) that receives the learner's full weights by broadcast.

vLLM mixes this class into each of its workers; the engine reaches its methods with `collective_rpc`, so each
runs in every worker process (one per tensor-parallel rank) with `self` the worker:

    kernelrl_open_channel(spec, first_rank)   join the learner's weight channel (rl.rollout.broadcast) as rank
                                              first_rank + the worker's rank
    kernelrl_receive()                        receive one full set of weights and load them in place

Weights load through the worker's `reload_weights(weights_iterator=...)`, which also re-runs the
post-load processing: on CPU vLLM repacks linear weights for oneDNN, which a plain `load_weights` into the
repacked model gets wrong; the same call is right on GPUs. Names and layouts are the HF checkpoint's.
"""

from __future__ import annotations

from typing import Any


class WeightSyncExtension:
    def kernelrl_open_channel(self, spec: dict[str, Any], first_rank: int) -> None:
        from rl.rollout.broadcast import ChannelSpec, open_channel

        self._kernelrl_channel = open_channel(ChannelSpec(**spec), first_rank + int(getattr(self, "rank", 0)))

    def kernelrl_receive(self) -> int:
        from rl.rollout.broadcast import receive

        version, tensors = receive(self._kernelrl_channel)
        self.reload_weights(weights_iterator=tensors, is_checkpoint_format=True)
        return version
