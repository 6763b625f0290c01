import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def tmp_cache(tmp_path):
    from envs.cache import SqliteCache

    cache = SqliteCache(tmp_path / "cache.sqlite")
    yield cache
    cache.close()


def builtin(problem_id: str):
    from envs import resolve_problem

    problem = resolve_problem(problem_id)
    return problem, Path(problem.reference_solution).read_text()


@pytest.fixture(autouse=True)
def _no_secret_leak(monkeypatch):
    # Tests that check scrubbing set their own secrets; keep the real environment out of workers.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    yield
