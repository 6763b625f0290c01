"""envs.screening.fit_problems through rl.data.ProblemData.fitted, as scripts/train.py calls it on a CPU run:
real worker processes running the references under the Triton interpreter's settings."""

import pytest

from envs.cache import SqliteCache
from envs.settings import EvalSettings
from envs.small_sizes import estimate_elements
from rl.data import DataConfig, DataError, ProblemData

pytestmark = pytest.mark.integration

MODULE = (
    "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
    "        return {out}\n\n"
)
INPUTS = "def get_inputs():\n    return [torch.rand(batch_size, dim)]\n\ndef get_init_inputs():\n    return []\n"


def write(directory, name, out, sizes):
    (directory / f"{name}.py").write_text(MODULE.format(out=out) + sizes + "\n" + INPUTS)


def test_a_cpu_run_sizes_large_problems_and_leaves_degenerate_ones_out(tmp_path):
    """A KernelBench-sized problem (4096 x 393216 floats, 6 GiB: the CPU worker's memory limit) gets derived
    small sizes; a degenerate one (its output is constant) is left out with the reason; a small one is kept as
    written; the split is kept."""
    problems = tmp_path / "set"
    problems.mkdir()
    write(problems, "big_relu", "torch.relu(x)", "batch_size = 4096\ndim = 393216\n")
    write(problems, "constant", "torch.ones_like(x)", "batch_size = 16\ndim = 64\n")
    write(problems, "small_tanh", "torch.tanh(x)", "batch_size = 16\ndim = 64\n")
    data = ProblemData.load(DataConfig(problems=str(problems), validation_ids=("small_tanh",)))
    cache = SqliteCache(tmp_path / "c.sqlite")
    fitted, skipped = data.fitted(EvalSettings(device="cpu"), cache)
    assert [p.id for p in fitted.train] == ["big_relu"] and [p.id for p in fitted.validation] == ["small_tanh"]
    assert set(skipped) == {"constant"} and skipped["constant"]
    big = fitted.train[0]
    assert big.small_sizes and estimate_elements(big.source, big.small_sizes) <= 65536
    assert fitted.validation[0].small_sizes == {}  # already small: runs as written
    again, skipped_again = data.fitted(EvalSettings(device="cpu"), cache)  # cached: the same answer
    assert again.train[0].small_sizes == big.small_sizes and skipped_again == skipped


def test_nothing_left_to_train_on_is_a_data_error(tmp_path):
    problems = tmp_path / "set"
    problems.mkdir()
    write(problems, "constant", "torch.zeros_like(x)", "batch_size = 16\ndim = 64\n")
    data = ProblemData.load(DataConfig(problems=str(problems), validation_fraction=0.0))
    with pytest.raises(DataError, match="no training problem can be evaluated here"):
        data.fitted(EvalSettings(device="cpu"))
