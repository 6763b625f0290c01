"""The worker's runtime defences, exercised directly on CPU tensors."""

import pytest
import torch

from envs.antihack import runtime as guard
from envs.antihack.runtime import RuntimeHack


def poisoned(shape, dtype=torch.float32):
    t = torch.empty(shape, dtype=dtype)
    int_dtype, bits = guard._POISON_BITS[dtype]
    t.view(int_dtype).fill_(bits)
    return t


def test_unwritten_outputs_are_recognised_by_the_poison_payload():
    guard.check_unwritten([torch.randn(100)])  # written: fine
    guard.check_unwritten([torch.full((7,), float("nan"))])  # a computed NaN is not the poison
    with pytest.raises(RuntimeHack) as e:
        guard.check_unwritten([poisoned((1000,))])
    assert e.value.category == "stale_memory"
    half = poisoned((1000,))
    half[:500] = 1.0
    with pytest.raises(RuntimeHack) as e:
        guard.check_unwritten([half])
    assert e.value.category == "partial_output" and "500 of 1000" in e.value.reason
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        with pytest.raises(RuntimeHack):
            guard.check_unwritten([poisoned((64,), dtype)])


def test_identity_storage_and_subclass_outputs():
    x = torch.randn(4, 4)
    model = torch.nn.Linear(4, 4)
    guard.check_outputs([x.clone()], [x], model)
    with pytest.raises(RuntimeHack, match="shares storage with input 0") as e:
        guard.check_outputs([x.view(16)], [x], model)
    assert e.value.category == "identity_kernel"
    with pytest.raises(RuntimeHack) as e:
        guard.check_outputs([model.weight.detach()], [x], model)
    assert e.value.category == "output_caching"

    class Lazy(torch.Tensor):
        pass

    with pytest.raises(RuntimeHack) as e:
        guard.check_outputs([x.clone().as_subclass(Lazy)], [x], model)
    assert e.value.category == "lazy_tensor"
    with pytest.raises(RuntimeHack, match="exact copy of input 0"):
        guard.check_not_identity([x.clone()], [x])


def test_inputs_must_be_unchanged():
    x = torch.randn(8)
    guard.check_inputs_unchanged([x.clone()], [x])
    pristine = x.clone()
    x.add_(1)
    with pytest.raises(RuntimeHack) as e:
        guard.check_inputs_unchanged([pristine], [x])
    assert e.value.category == "input_mutation"


def test_identity_snapshot_sees_patched_timers_and_comparisons(monkeypatch):
    import time

    before = guard.identity_snapshot()
    guard.check_identities(before, "now")
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    with pytest.raises(RuntimeHack) as e:
        guard.check_identities(before, "during forward")
    assert e.value.category == "timer_patch" and "time.perf_counter" in e.value.reason
    monkeypatch.undo()
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    with pytest.raises(RuntimeHack) as e:
        guard.check_identities(before, "x")
    assert e.value.category == "comparison_patch"


def test_a_launcher_set_on_the_fused_comparisons_binary_is_a_comparison_patch(monkeypatch):
    """What the fused comparison's launch goes through (envs/fused_compare.py): an instance attribute set since the
    snapshot, here a launcher of one's own on its prepared binary, or a Triton launch hook."""
    import triton

    from envs import fused_compare

    class Binary:
        pass

    binary = Binary()
    monkeypatch.setattr(fused_compare, "_BINARY", binary)
    before = guard.identity_snapshot()
    guard.check_identities(before, "now")
    binary._run = lambda *args: None
    with pytest.raises(RuntimeHack) as e:
        guard.check_identities(before, "while the solution was imported")
    assert e.value.category == "comparison_patch"
    del binary._run
    guard.check_identities(before, "now")
    monkeypatch.setattr(triton.knobs.runtime, "launch_enter_hook", lambda *args: None)
    with pytest.raises(RuntimeHack) as e:
        guard.check_identities(before, "during ModelNew.forward")
    assert e.value.category == "comparison_patch"
    monkeypatch.undo()
    before = guard.identity_snapshot()
    monkeypatch.setattr(fused_compare, "_inside_partials", 5)  # something without attributes: named, not a crash
    with pytest.raises(RuntimeHack) as e:
        guard.check_identities(before, "now")
    assert e.value.category == "comparison_patch" and "_inside_partials" in e.value.reason


@pytest.mark.parametrize("name", ["time_in_placements", "placement_blocks", "block_warmup", "interleaved_schedule"])
def test_identity_snapshot_sees_the_placement_timing_replaced(monkeypatch, name):
    import envs.timing

    before = guard.identity_snapshot()
    monkeypatch.setattr(envs.timing, name, lambda *a, **k: None)  # e.g. one short block of made-up times
    with pytest.raises(RuntimeHack) as e:
        guard.check_identities(before, "during the timed runs")
    assert e.value.category == "timer_patch" and f"envs.timing.{name}" in e.value.reason


def test_identity_snapshot_sees_the_allocator_reading_replaced(monkeypatch):
    """The warm-up reads torch.cuda.memory_reserved to go on while the pools grow: a candidate that froze it
    would leave the anchor's runs paying for driver allocations, its baseline slow and the speedup high."""
    before = guard.identity_snapshot()
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda *a, **k: 0)
    with pytest.raises(RuntimeHack) as e:
        guard.check_identities(before, "during the timed runs")
    assert e.value.category == "timer_patch" and "torch.cuda.memory_reserved" in e.value.reason


def _recorded(fn) -> list:
    recorder = guard.ComputeRecorder(guard.LaunchRecorder())
    with recorder:
        fn()
    return recorder.ops


def test_compute_recorder_prices_torch_compute_against_the_reference():
    x = torch.randn(1000)
    reference = _recorded(lambda: torch.nn.functional.relu(x))
    recorder = guard.ComputeRecorder(guard.LaunchRecorder())
    with recorder:
        out = torch.empty_like(x)  # allocation, views and copies are layout: free
        out.copy_(x.view(10, 100).t().contiguous().reshape(-1))
        small = x[:10].sum()  # a tiny reduction: a small share
    share = recorder.share(reference)
    guard.check_torch_share(share, "forward", max_share=0.25)
    assert share is not None and 0 < share.share < 0.05 and small is not None
    with recorder:
        torch.nn.functional.relu(x)
    with pytest.raises(RuntimeHack, match="aten.relu") as e:
        guard.check_torch_share(recorder.share(reference), "forward", max_share=0.25)
    assert e.value.category == "baseline_kernel" and "100% of the reference's work" in e.value.reason


def test_concurrency_snapshot_sees_new_threads():
    import threading

    before = guard.concurrency_snapshot()
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        with pytest.raises(RuntimeHack) as e:
            guard.check_concurrency(before)
        assert e.value.category == "concurrency"
    finally:
        stop.set()
        t.join()


def test_physical_floor():
    assert guard.floor_ms(4_800_000_000, 0, "NVIDIA H200") == pytest.approx(1.0)
    assert guard.floor_ms(0, 989e12, "NVIDIA H100 80GB HBM3") == pytest.approx(1000.0)
    assert guard.peak_rates("Some Future GPU") == guard._FALLBACK_PEAK


def test_tile_bytes_repeats_a_pattern_from_the_start_of_a_block():
    """What the CUDA path writes into every free allocator block (here on a CPU buffer)."""
    block = torch.zeros(4 * 25 + 3, dtype=torch.uint8)
    int_dtype, bits = guard._POISON_BITS[torch.float32]
    guard.tile_bytes(block, torch.tensor([bits], dtype=int_dtype))
    with pytest.raises(RuntimeHack) as e:  # read back as the output a candidate never wrote
        guard.check_unwritten([block[:100].view(torch.float32)])
    assert e.value.category == "stale_memory" and "25 of 25" in e.value.reason
    expected = torch.randn(7)
    guard.tile_bytes(block, expected)
    assert torch.equal(block[:28].view(torch.float32), expected)
    assert torch.equal(block[28:56].view(torch.float32), expected)
    assert torch.equal(block[84:], expected.view(torch.uint8)[:19])  # 103 = 3 * 28 + 19: the cut-short copy


def test_a_pattern_from_elsewhere_is_doubled_in_place_to_the_same_bytes():
    """The CUDA poison's pattern stays on the CPU and is doubled inside the block it fills, so the fill
    allocates no device block of its own (one left unfilled after it; tests/gpu/test_memory_poison.py)."""
    int_dtype, bits = guard._POISON_BITS[torch.float32]
    pattern = torch.tensor([bits], dtype=int_dtype).view(torch.uint8)
    other = torch.arange(7, dtype=torch.uint8)  # a pattern length no block size is a multiple of
    for p in (pattern, other):
        for n in (1, 3, 4, 7, 8, 9, 64, 1000, 4099):
            tiled, doubled = torch.zeros(n, dtype=torch.uint8), torch.zeros(n, dtype=torch.uint8)
            guard.tile_bytes(tiled, p)
            guard.double_in_place(doubled, p)
            assert torch.equal(doubled, tiled), (p, n)
            assert torch.equal(doubled, p.repeat(n // p.numel() + 1)[:n])


def test_the_cuda_poison_fills_every_free_block_from_a_pattern_staged_in_the_largest(monkeypatch):
    """The CUDA branch's staging, on CPU buffers standing in for the allocator's free blocks (enumerating
    those needs a GPU: tests/gpu/test_memory_poison.py)."""
    blocks = [torch.zeros(n, dtype=torch.uint8) for n in (512, 3 << 20, 1536, 2 << 20, 7)]
    monkeypatch.setattr(guard, "free_cuda_blocks", lambda: blocks)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    guard.poison_free_memory([torch.empty(3, dtype=torch.float16)], torch.device("cuda"))
    int_dtype, bits = guard._POISON_BITS[torch.float16]
    pattern = torch.tensor([bits], dtype=int_dtype).view(torch.uint8)
    for block in blocks:
        assert torch.equal(block, pattern.repeat(block.numel() // 2 + 1)[: block.numel()]), block.numel()


def test_cpu_poison_pattern_per_dtype():
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        with pytest.raises(RuntimeHack):
            guard.check_unwritten([guard._poisoned_like(torch.empty(64, dtype=dtype))])
    assert guard._poisoned_like(torch.empty(3, dtype=torch.int32)).eq(torch.iinfo(torch.int32).min).all()
    assert guard._poisoned_like(torch.empty(3, dtype=torch.bool)).all()


def test_pieces_cover_every_element_once_in_matching_views():
    for t in (
        torch.arange(1000.0),
        torch.arange(1000.0).view(10, 100).t(),  # transposed: sliced along its longest dimension
        torch.arange(1200.0).view(3, 400)[:, ::2],  # strided
        torch.tensor(5.0),
        torch.empty(0),
    ):
        other = t.clone()
        seen = []
        for x, y in guard.pieces(t, other, elements=64):
            assert x.shape == y.shape and x.numel() <= max(64, t.numel() // max((1, *t.shape)))
            seen += x.reshape(-1).tolist()
            assert torch.equal(x, y)
        assert sorted(seen) == sorted(t.reshape(-1).tolist())


def test_checks_in_pieces_find_a_difference_in_any_piece(monkeypatch):
    monkeypatch.setattr(guard, "CHUNK_ELEMENTS", 16)
    x = torch.randn(40, 30).t()  # non-contiguous: pieces along a dimension
    pristine = x.clone()
    x[0, 0] = float("nan")
    pristine[0, 0] = float("nan")  # NaN where it was NaN: unchanged
    guard.check_inputs_unchanged([pristine], [x])
    x[29, 39] += 1  # the last piece
    with pytest.raises(RuntimeHack, match="modified input 0"):
        guard.check_inputs_unchanged([pristine], [x])
    out = torch.randn(100)
    out[90:] = poisoned((10,))  # unwritten in the last piece only
    with pytest.raises(RuntimeHack, match="10 of 100") as e:
        guard.check_unwritten([out])
    assert e.value.category == "partial_output"
    with pytest.raises(RuntimeHack) as e:
        guard.check_unwritten([poisoned((40, 30)).t()])  # never written, non-contiguous
    assert e.value.category == "stale_memory"


def test_a_piece_with_matching_nans_still_shows_a_change_beside_them_and_integers_compare_plainly():
    x = torch.randn(50)
    x[3] = float("nan")
    changed = x.clone()
    changed[40] += 1  # the same piece as the NaN, which matches
    with pytest.raises(RuntimeHack, match="modified input 0"):
        guard.check_inputs_unchanged([x], [changed])
    ints = torch.arange(50)
    guard.check_inputs_unchanged([ints.clone()], [ints])
    bumped = ints.clone()
    bumped[7] = -1
    with pytest.raises(RuntimeHack, match="modified input 0"):
        guard.check_inputs_unchanged([ints], [bumped])


def test_complex_inputs_match_nan_for_nan_component_by_component():
    x = torch.randn(6, 6, dtype=torch.complex64)
    x[1, 2] = complex(float("nan"), 1.0)
    guard.check_inputs_unchanged([x.clone()], [x])  # the same NaN where it was: unchanged
    moved = x.clone()
    moved[1, 2] = complex(2.0, float("nan"))  # NaN in the other component: a change
    with pytest.raises(RuntimeHack, match="modified input 0"):
        guard.check_inputs_unchanged([x], [moved])
    guard.check_inputs_unchanged([x.conj()], [x.conj().clone()])  # a conjugate view compares by value
