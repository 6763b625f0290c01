"""scripts/bench_compare.py: both comparison paths on one output, the same verdict and maximum."""

import json

import pytest

from scripts import bench_compare


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_both_paths_are_timed_and_agree(capsys, dtype):
    assert bench_compare.main(["--device", "cpu", "--gib", "0.001", "--repeats", "1", "--dtype", dtype]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    paths = report["paths"]
    assert set(paths) == {"float32_pass", "float64_path"} and all(p["seconds"] > 0 for p in paths.values())
    assert paths["float32_pass"]["max_abs"] == paths["float64_path"]["max_abs"] and paths["float32_pass"]["passed"]


def test_bad_sizes_are_refused():
    with pytest.raises(SystemExit):
        bench_compare.main(["--device", "cpu", "--gib", "0"])
