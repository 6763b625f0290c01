"""The curation pipeline's runtime stage on a GPU: baselines measured through the workers, the bounds applied."""

from __future__ import annotations

import pytest

from envs.data.records import CandidateProblem, Origin
from envs.data.runtime import RuntimeConfig, filter_runtime
from envs.problems import resolve_problem
from envs.settings import EvalSettings

pytestmark = [pytest.mark.gpu, pytest.mark.integration]


def test_runtime_stage_times_and_filters():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from envs.worker.worker_set import WorkerSet

    matmul = resolve_problem("L3_01_matmul")  # ~ms at full size on an H100-class GPU
    relu = resolve_problem("L0_02_relu")
    cands = [CandidateProblem(p.id, p.source, Origin("kernelbench", p.id)) for p in (matmul, relu)]
    pool = WorkerSet(EvalSettings(device="cuda"))
    try:
        wide = filter_runtime(cands, pool, RuntimeConfig(min_ms=0.0, max_ms=10_000.0))
        assert [c.id for c in wide.kept] == ["L3_01_matmul", "L0_02_relu"]
        times = {c.id: c.facts["baselines"]["eager_ms"] for c in wide.kept}
        assert all(t > 0 for t in times.values())
        assert all(c.facts["baselines"]["inductor_ms"] is not None for c in wide.kept)
        fast, slow = sorted(times.values())
        narrow = filter_runtime(cands, pool, RuntimeConfig(min_ms=(fast + slow) / 2, max_ms=10_000.0))
        assert len(narrow.kept) == 1 and narrow.kept[0].facts["baselines"]["eager_ms"] == pytest.approx(slow, rel=0.5)
        assert any("ms <" in d.reason for d in narrow.decisions if d.decision == "reject")
    finally:
        pool.close()
