"""The benchmark suite (scripts/benchmark.py): policies (rl.bench.policies), modes (rl.bench.runner), metrics
(rl.bench.metrics: also the training loop's validation), outputs (rl.bench.report), the run (rl.bench.main)."""
