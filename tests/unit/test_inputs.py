"""Input families and the sensitivity probe's perturbation (envs/inputs.py), on hand-made inputs."""

import math

import pytest
import torch

from envs import inputs as fam
from envs.settings import INPUT_FAMILIES, EvalSettings


def base():
    torch.manual_seed(0)
    return [
        torch.randn(6, 4000),
        torch.randint(0, 10, (6,)),
        torch.randn(6, 4000).t(),
        torch.randint(0, 2, (6, 4000)).float(),
        torch.rand(5000) < 0.5,
        3,
        0.5,
    ]


@pytest.mark.parametrize("family", INPUT_FAMILIES)
def test_families_keep_shapes_dtypes_layouts_and_leave_indices_alone(family):
    inputs = base()
    pristine = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    out = fam.derive(inputs, family, fam.generator(7, torch.device("cpu")))
    for before, x, y in zip(pristine, inputs, out):
        if isinstance(x, torch.Tensor):
            assert torch.equal(x, before)  # the draw itself is untouched
            assert (y.shape, y.dtype, y.device, y.stride()) == (x.shape, x.dtype, x.device, x.stride())
    assert not torch.equal(out[0], inputs[0]) and not torch.equal(out[2], inputs[2])
    assert out[1] is inputs[1] and out[3] is inputs[3] and out[4] is inputs[4]  # indices, a float mask, bools
    assert out[5:] == [3, 0.5]
    again = fam.derive(base(), family, fam.generator(7, torch.device("cpu")))
    assert torch.equal(again[0], out[0])  # a family is a function of the seed


def test_outliers_are_sparse_large_and_keep_the_sign():
    x = torch.randn(100, 1000)
    y = fam.derive([x], "outliers", fam.generator(1, torch.device("cpu")))[0]
    moved = y != x
    assert 50 <= int(moved.sum()) <= 100  # about one in a thousand
    assert torch.all(torch.sign(y[moved]) == torch.sign(x[moved]))
    assert float(y[moved].abs().min()) >= 99 * float(x.std())
    near_constant = 5.0 + 1e-3 * torch.randn(1000)  # moved by its magnitude (~5), not its spread
    assert float(fam.derive([near_constant], "outliers", fam.generator(1, torch.device("cpu")))[0].max()) > 400


def test_block_scale_rows_and_1d_blocks():
    x = torch.full((50, 300), 0.5)  # not whole numbers: varied
    y = fam.derive([x], "block_scale", fam.generator(2, torch.device("cpu")))[0] * 2
    factors = y[:, 0]
    assert torch.all(y[:, :256] == factors[:, None])  # one factor per row and block of 256
    assert torch.all(y[:, 256:] == y[:, 256:257]) and torch.any(y[:, 256] != factors)
    assert float(factors.min()) >= 1 / 16 and float(factors.max()) <= 16 and float(factors.std()) > 0.5
    v = fam.derive([torch.full((1000,), 0.5)], "block_scale", fam.generator(2, torch.device("cpu")))[0]
    assert len(set(v[:256].tolist())) == 1 and v[255] != v[256]


def test_alternating_ramp_and_large_magnitude():
    x = torch.randn(4, 10)
    alt = fam.derive([x], "alternating", fam.generator(3, torch.device("cpu")))[0]
    assert torch.equal(alt.abs(), x.abs()) and torch.all(alt[:, 0::2] >= 0) and torch.all(alt[:, 1::2] <= 0)
    ramp = fam.derive([x], "ramp", fam.generator(3, torch.device("cpu")))[0]
    steps = ramp.diff(dim=1)
    assert torch.allclose(steps, steps[:, :1].expand_as(steps), atol=1e-5)  # linear in every row
    assert len(set(steps[:, 0].tolist())) == 4  # rows differ
    big = fam.derive([x], "large_magnitude", fam.generator(3, torch.device("cpu")))[0]
    assert torch.equal(big, x * 65536)  # exact, and past float16's range
    assert float(big.abs().max()) > torch.finfo(torch.float16).max
    half = fam.derive([x.half()], "large_magnitude", fam.generator(3, torch.device("cpu")))[0]
    assert torch.isfinite(half).all() and torch.equal(half, x.half() * 4)


def test_trial_plan_starts_plain_and_gives_each_family_a_trial():
    assert fam.trial_plan(5, ["outliers", "ramp"]) == [None, "outliers", "ramp", None, None]
    assert fam.trial_plan(3, []) == [None, None, None]
    assert EvalSettings(correctness_trials=2).trial_count() == 1 + len(EvalSettings().input_families)
    # the probe takes the place of a get_inputs() trial: 5 candidate calls by default, as without families
    assert EvalSettings().trial_count() == 4 and EvalSettings(sensitivity_probe=False).trial_count() == 5
    assert EvalSettings(correctness_trials=7, input_families=[], sensitivity_probe=False).trial_count() == 7


def test_settings_check_and_key_the_fidelity_options():
    s = EvalSettings(input_families=["ramp", "outliers"])  # a Hydra list
    assert s.input_families == ("ramp", "outliers") and hash(s)
    with pytest.raises(ValueError, match="input_families"):
        EvalSettings(input_families=["gaussian"])
    with pytest.raises(ValueError, match="input_families"):
        EvalSettings(input_families=["ramp", "ramp"])
    with pytest.raises(ValueError, match="fp64_truth"):
        EvalSettings(fp64_truth="sometimes")
    keys = {
        s.cache_fields("cpu")["families"] != EvalSettings().cache_fields("cpu")["families"],
        EvalSettings(sensitivity_probe=False).cache_fields("cpu") != EvalSettings().cache_fields("cpu"),
        EvalSettings(fp64_truth="off").cache_fields("cpu") != EvalSettings().cache_fields("cpu"),
    }
    assert keys == {True}


def test_perturbed_moves_a_few_elements_of_each_varied_tensor_in_place_and_puts_them_back():
    x, idx, mask = torch.randn(64, 64), torch.arange(5), torch.ones(64)
    original = x.clone()
    with fam.perturbed([x, idx, mask], 16.0, fam.generator(4, torch.device("cpu"))) as (args, where):
        assert args[0] is x and args[1] is idx and args[2] is mask  # no copies
        changed = x != original
        assert 1 <= int(changed.sum()) <= fam.PROBE_ELEMENTS
        assert float((x - original)[changed].abs().min()) == pytest.approx(16 * float(original.std()), rel=1e-3)
        assert len(where) == 1 and where[0].startswith("input 0 at [")
    assert torch.equal(x, original)
    with fam.perturbed([x], 1e40, fam.generator(4, torch.device("cpu"))) as (huge, _):
        assert torch.isfinite(huge[0]).all()  # clamped to the dtype's range
    with pytest.raises(RuntimeError), fam.perturbed([x], 16.0, fam.generator(4, torch.device("cpu"))):
        raise RuntimeError("the candidate failed")
    assert torch.equal(x, original)  # put back however the block ends


def test_perturbed_moves_the_same_elements_whatever_the_layout_and_copies_an_input_that_shares_storage():
    base = torch.randn(32, 48)
    strided = base.t()  # not contiguous: moved in place through its own strides
    with fam.perturbed([base.t().contiguous()], 256.0, fam.generator(9, torch.device("cpu"))) as (dense, _):
        expected = dense[0].clone()
    with fam.perturbed([strided], 256.0, fam.generator(9, torch.device("cpu"))) as (moved, where):
        assert moved[0] is strided and torch.equal(strided, expected)
    assert torch.equal(strided, base.t()) and not torch.equal(expected, base.t())
    # the same tensor twice: each argument moves as if alone, the second in a copy taken before the first moved
    original = base.clone()
    with fam.perturbed([base, base], 256.0, fam.generator(9, torch.device("cpu"))) as (twice, where):
        assert twice[0] is base and twice[1] is not base and len(where) == 2
        first, second = twice[0] != original, twice[1] != original
        assert 1 <= int(first.sum()) <= fam.PROBE_ELEMENTS and 1 <= int(second.sum()) <= fam.PROBE_ELEMENTS
        assert not torch.equal(first, second)
    assert torch.equal(base, original)


def _response_ratio_over_all_elements(before, after, scale):
    """The ratio weighed over every element in float64, as it was before only the moved elements were."""
    x, y = before.double().reshape(-1), after.double().reshape(-1)
    allowed = 1e-4 * scale + 1e-4 * torch.maximum(x.abs(), y.abs())
    return float(((y - x).abs() / allowed.clamp_min(1e-300)).max())


@pytest.mark.parametrize("moved", [0, 3, 4000, 1 << 16])
def test_the_response_ratio_weighs_only_moved_elements_and_equals_the_full_float64_one(moved):
    g = torch.Generator().manual_seed(moved)
    before = torch.randn(1 << 16, generator=g)
    before[:8] = torch.tensor([0.0, -0.0, 1e-30, -1e30, 3.0, -3.0, 1e-45, 7.0])
    after = before.clone()
    where = torch.randperm(before.numel(), generator=g)[:moved]
    after[where] += torch.randn(moved, generator=g) * 1e-3
    after[1] = 0.0  # -0.0 against 0.0 is no move
    expected = _response_ratio_over_all_elements(before, after, 2.0)
    assert fam.response_ratio(before, after, None, [2.0]) == expected
    assert (expected == 0.0) == (moved == 0)


def test_response_ratio_and_atol_scales():
    before = torch.zeros(10)
    after = before.clone()
    after[3] = 0.01  # 100 times atol
    assert fam.response_ratio(before, after, None, [1.0]) == pytest.approx(0.01 / (1e-4 + 1e-6))
    assert fam.response_ratio(before, after, None, [10.0]) < 10
    assert fam.atol_scales([torch.full((4,), 8.0), torch.ones(2)], [2.0, 4.0]) == [4.0, 1.0]
    assert fam.atol_scales(torch.zeros(3), [0.0]) == [1.0]
    assert fam.atol_scales(torch.full((4,), 1e200, dtype=torch.float64), [1.0]) == [1.0]  # squares overflow
    assert fam.is_finite((torch.ones(2), torch.arange(3))) and not fam.is_finite(torch.tensor([math.inf]))
