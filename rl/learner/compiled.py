"""`policy.compile`: torch.compile of each decoder layer's forward and of the chunked lm_head log-softmax.

Eager transformers runs RMSNorm, SwiGLU, RoPE and the residual adds as separate memory-bound kernels, and the
chunked logprobs (rl.learner.logprobs) materialise several [chunk, vocab] float32 tensors; inductor fuses them.

Only each layer's `forward` (an instance attribute shadowing the class's) is compiled, not the module:
- no wrapper module, so state-dict keys (checkpoints, exports, weight sync) keep their plain names (no `_orig_mod.`);
- the module's `__call__` stays eager, so FSDP2's pre/post-forward hooks (rl.learner.sharded) and HF's gradient
  checkpointing (which wraps `__call__`) run around the compiled region, not inside it.
All layers of a model share one code object, hence one compiled graph. `dynamic=True`: RL batches change length
every step, and a symbolic batch/sequence length compiles once instead of once per length (the parameters'
shapes stay static).
"""

from __future__ import annotations

from typing import Callable

import torch

# Each variant of a layer is a cache entry of the one shared code object: grad on/off (train vs scoring passes),
# a padding mask or none, batch 1 (specialised) or more, the frozen reference, a LoRA adapter disabled. Past
# dynamo's default of 8 the layers would silently run eager.
RECOMPILE_LIMIT = 32


def compile_fn(fn: Callable) -> Callable:
    return torch.compile(fn, dynamic=True)


def is_compiled(fn: Callable) -> bool:
    """Whether `fn` is a torch.compile wrapper (what compile_decoder_layers installs)."""
    return hasattr(fn, "_torchdynamo_orig_callable")


def compile_decoder_layers(causal_lm: torch.nn.Module) -> int:
    """Compile the forward of every decoder layer of a transformers *ForCausalLM in place; returns how many."""
    layers = causal_lm.get_decoder().layers
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    for layer in layers:
        if not is_compiled(layer.forward):
            layer.forward = compile_fn(layer.forward)
    return len(layers)
