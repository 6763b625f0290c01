"""What the policy reads from `kernel_evaluator` and `profile` for the built-in reference solutions (and one
broken variant each), with the wall time of each tool call. Runs on one machine without Ray:

    python scripts/tool_feedback.py --device cuda L0_02_relu L2_01_softmax L3_01_matmul
    python scripts/tool_feedback.py --device cpu L0_02_relu          # correctness only; profile says it needs a GPU
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs import EvalSettings, Evaluator, resolve_problem  # noqa: E402
from envs.tools import TOOLS, ToolContext  # noqa: E402
from envs.tools.local import LocalEvaluation  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("problems", nargs="+")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--size", default=None, help="full or small (default: full on cuda, small on cpu)")
    args = parser.parse_args()
    settings = EvalSettings(device=args.device, **({"size": args.size} if args.size else {}))
    with Evaluator(settings) as evaluator:
        backend = LocalEvaluation(evaluator)
        for problem_id in args.problems:
            problem = resolve_problem(problem_id)
            reference = Path(problem.reference_solution).read_text()
            broken = reference.replace("tl.store(", "tl.store(1 + ", 1) if "tl.store(" in reference else reference
            for label, tool, code in (("reference", "kernel_evaluator", reference),
                                      ("reference", "profile", reference),
                                      ("broken (first store shifted by one element)", "kernel_evaluator", broken)):
                context = ToolContext(problem, evaluator=backend, profiler=backend, evaluations_left=10)
                started = time.perf_counter()
                result = asyncio.run(TOOLS[tool].run({"code": code}, context))
                print(f"===== {problem_id} | {tool} | {label} | {time.perf_counter() - started:.1f} s")
                print(result.text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
