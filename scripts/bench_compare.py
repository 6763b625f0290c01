"""Output comparison's cost (envs/compare.py): the float32 pass that settles outputs clearly inside their bounds
(on a GPU one Triton kernel, envs/fused_compare.py; `torch_pass` is the same pass in torch operations) against the
float64 path that judges everything else, on one output of a given size.

A correct answer is compared 9-10 times per evaluation (trials, probe, kept timed outputs, refill), so on
full-size problems this is part of every evaluation's GPU time (docs/gpu-notes.md, session 35: a 3 GiB output
on an H100, 36 ms against 97 ms).

    python scripts/bench_compare.py --device cuda --gib 3 [--repeats 3] [--dtype float32]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import torch

from envs import compare

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(n: int, dtype: torch.dtype, device: torch.device, repeats: int) -> dict[str, dict[str, Any]]:
    """Per path: seconds per comparison of an n-element output 1e-5 (noise) from its reference, its verdict,
    maximum and rms, and (CUDA only) the GiB it held at its peak beyond the two operands."""
    gen = torch.Generator(device).manual_seed(0)
    ref = torch.randn(n, generator=gen, device=device).to(dtype)
    out = ref + (torch.randn(n, generator=gen, device=device) * 1e-5).to(dtype)
    atol, rtol = compare.tolerance_for(dtype)
    margin = compare._FLOAT32_MARGIN
    paths = {
        "float32_pass": lambda: compare.compare_tensor(ref, out, atol, rtol),  # on a GPU one Triton kernel
        # the same pass in torch operations (the CPU's, and the GPU's before the kernel)
        "torch_pass": lambda: compare._clearly_inside_in_chunks(ref, out, atol * margin, rtol * margin),
        "float64_path": lambda: compare._compare_float64(ref, ref.reshape(-1), out.reshape(-1), atol, rtol),
    }
    results = {}
    for name, run in paths.items():
        first = run()  # warm-up, and the verdict all must agree on
        if isinstance(first, tuple) or first is None:  # the torch pass alone: (max, sum of squares) or None
            first = compare.TensorComparison(
                None if first else {}, *((first[0], (first[1] / n) ** 0.5) if first else (None, None))
            )
        _sync(device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        began = time.perf_counter()
        for _ in range(repeats):
            run()
        _sync(device)
        results[name] = {
            "seconds": (time.perf_counter() - began) / repeats,
            "passed": first.mismatch is None,
            "max_abs": first.max_abs,
            "rms": first.rms,
        }
        if device.type == "cuda":
            held = torch.cuda.max_memory_allocated(device) - 2 * ref.numel() * ref.element_size()
            results[name]["extra_gib"] = held / 2**30
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--gib", type=float, default=3.0, help="the reference output's size")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.gib <= 0 or args.repeats < 1:
        parser.error("--gib must be positive and --repeats at least 1")
    dtype = DTYPES[args.dtype]
    n = int(args.gib * 2**30) // torch.empty((), dtype=dtype).element_size()
    results = measure(n, dtype, torch.device(args.device), args.repeats)
    for name, r in results.items():
        print(f"[{name}] {n} {args.dtype} elements: {1000 * r['seconds']:.1f} ms, passed {r['passed']}")
    print(json.dumps({"elements": n, "dtype": args.dtype, "device": args.device, "paths": results}))
    return 0 if len({(r["passed"], r["max_abs"]) for r in results.values()}) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
