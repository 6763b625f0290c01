"""scripts/bench_compare.py: the comparison's paths on one output, the same verdict and maximum."""

import json

import pytest

from scripts import bench_compare


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_every_path_is_timed_and_they_agree(capsys, dtype):
    assert bench_compare.main(["--device", "cpu", "--gib", "0.001", "--repeats", "1", "--dtype", dtype]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    paths = report["paths"]
    assert set(paths) == {"float32_pass", "torch_pass", "float64_path"}
    assert all(p["seconds"] > 0 for p in paths.values())
    assert len({p["max_abs"] for p in paths.values()}) == 1 and all(p["passed"] for p in paths.values())


def test_bad_sizes_are_refused():
    with pytest.raises(SystemExit):
        bench_compare.main(["--device", "cpu", "--gib", "0"])
