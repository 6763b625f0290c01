import weakref

import pytest


def test_runs_are_split_evenly_over_placements_and_never_into_empty_blocks():
    from envs.timing import split_runs

    assert split_runs(100, 3) == [34, 33, 33]
    assert split_runs(50, 3) == [17, 17, 16]
    assert split_runs(2, 3) == [1, 1]
    assert split_runs(7, 1) == [7]
    assert sum(split_runs(101, 4)) == 101


class QuietClock:
    """A clock's surface (envs.timing.Clock) for fake GPUs: nothing to settle, no allocator growth."""

    def settle(self) -> None:
        pass

    def reserved(self):
        return 0


class PlacementClock(QuietClock):
    """A GPU on which a callable's time depends on where its inputs are: every placement (counted by
    `moved`) slows the kernel by its own factor; the anchor is unaffected."""

    def __init__(self, factors: list[float]):
        self.factors, self.placement, self.order = factors, 0, []

    def moved(self) -> None:
        self.placement += 1

    def measure(self, fn):
        out = fn()
        self.order.append(out)
        return (0.5 * self.factors[self.placement] if out == "kernel" else 1.0), out


def test_placement_blocks_share_both_callables_runs_and_never_leave_the_candidate_a_block_empty():
    from envs.timing import Block, placement_blocks

    def shares(runs, anchor_runs, placements=3):
        return [(b.runs, b.anchor_runs) for b in placement_blocks(runs, anchor_runs, placements)]

    assert shares(100, 50) == [(34, 17), (33, 17), (33, 16)]
    assert shares(100, 0) == [(34, 0), (33, 0), (33, 0)]  # re-anchoring off
    assert shares(100, 2) == [(34, 1), (33, 1), (33, 0)]  # fewer anchor runs than blocks: the last has none
    assert shares(2, 50) == [(1, 25), (1, 25)]  # fewer runs than placements: two blocks, anchor shared by them
    assert shares(100, 50, 1) == [(100, 50)]
    assert placement_blocks(1, 1, 3) == [Block(1, 1)]


@pytest.mark.parametrize("runs,anchor_runs", [(100, 50), (100, 0), (100, 2), (2, 50)])
def test_timed_runs_carry_their_placement_block_and_the_inputs_move_between_blocks(runs, anchor_runs):
    from envs.timing import ANCHOR, KERNEL, interleaved_schedule, placement_blocks, time_in_placements

    blocks = placement_blocks(runs, anchor_runs, 3)
    clock = PlacementClock([1.0, 1.2, 0.9])
    fns = {KERNEL: lambda: KERNEL, **({ANCHOR: lambda: ANCHOR} if anchor_runs else {})}
    keep = (0, runs - 1)
    timed = time_in_placements(fns, blocks, clock.moved, clock=clock, warmup_ms=0, keep=keep)
    assert clock.placement == len(blocks) - 1  # moved before every block after the first
    assert timed.blocks[KERNEL] == [b for b, block in enumerate(blocks) for _ in range(block.runs)]
    assert len(timed.samples[KERNEL]) == runs
    # Each sample is the time of its own placement: the ids are where the runs really ran.
    assert timed.samples[KERNEL] == [0.5 * clock.factors[b] for b in timed.blocks[KERNEL]]
    if anchor_runs:
        assert timed.blocks[ANCHOR] == [b for b, block in enumerate(blocks) for _ in range(block.anchor_runs)]
        assert len(timed.samples[ANCHOR]) == anchor_runs
    # The timed runs (warm-up runs do not go through clock.measure) follow each block's interleaved
    # schedule, block after block.
    assert clock.order == [name for block in blocks for name in interleaved_schedule(block.runs, block.anchor_runs)]
    assert set(timed.kept) == set(keep) and timed.kept[runs - 1] == KERNEL  # indices count over all blocks
    assert set(timed.seconds) == set(fns)


def test_several_blocks_need_a_way_to_move_the_inputs():
    from envs.timing import KERNEL, placement_blocks, time_in_placements

    with pytest.raises(ValueError):
        time_in_placements({KERNEL: lambda: KERNEL}, placement_blocks(10, 0, 2), None, clock=PlacementClock([1.0]))


def test_a_fresh_placement_never_lands_on_the_copies_it_replaces():
    import torch

    from envs.worker.outcome import clone_args, move_to_fresh_placement

    inputs = [torch.randn(1 << 16), 3]
    placed = {"inputs": inputs, "anchor": clone_args(inputs)}
    for _ in range(3):
        before = placed["inputs"][0].data_ptr(), placed["anchor"][0].data_ptr()
        move_to_fresh_placement(placed, inputs)
        assert placed["inputs"][0].data_ptr() != before[0] and placed["anchor"][0].data_ptr() != before[1]
        assert torch.equal(placed["inputs"][0], inputs[0]) and torch.equal(placed["anchor"][0], inputs[0])
        assert placed["inputs"][1] == 3 and placed["inputs"][0] is not placed["anchor"][0]
    move_to_fresh_placement(placed, inputs, shared_anchor=True)  # one copy, the anchor's too
    assert placed["anchor"] is placed["inputs"] and placed["inputs"][0] is not inputs[0]
    assert torch.equal(placed["inputs"][0], inputs[0])


def test_the_wait_after_a_release_grows_with_the_bytes_released_up_to_its_cap():
    from envs.gpu_lock import RELEASE_SETTLE_MAX_S, release_settle_seconds

    assert release_settle_seconds(0) == 0.0 and release_settle_seconds(-(1 << 30)) == 0.0
    small, large = release_settle_seconds(64 << 20), release_settle_seconds(13 * 10**9)
    assert 0 < small < 0.001 and 0.02 <= large <= RELEASE_SETTLE_MAX_S  # 13 GB needed 10-20 ms on an H100
    assert release_settle_seconds(1 << 40) == RELEASE_SETTLE_MAX_S


def test_a_queued_clock_spins_twice_the_recent_host_time_within_the_allowance():
    from envs.timing import MIN_SPIN_MS, spin_ms

    assert spin_ms(1.0) == 1.0  # nothing seen yet: the whole allowance
    assert spin_ms(1.0, [0.05, 0.2, 0.1]) == 0.4  # the slowest recent call, twice
    assert spin_ms(1.0, [0.8]) == 1.0  # never past the allowance: host time beyond it is counted
    assert spin_ms(1.0, [0.001]) == MIN_SPIN_MS


@pytest.mark.parametrize("allowance", [0.0, 0.5])
def test_a_checked_call_starts_from_a_timed_runs_stream_state_with_nothing_between(monkeypatch, allowance):
    """Synchronized, then (with an allowance) a spin of it at the nominal clock, and the candidate next: host
    work between the spin and the call could outlast the spin and leave the stream idle again, which a timed
    run never sees (tests/hacks/hack_phase_detection_busy_stream.py)."""
    import types

    import torch

    from envs.timing import NOMINAL_SPIN_CYCLES_PER_MS
    from envs.worker.evaluation import Evaluation

    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: calls.append("sync"))
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: calls.append(("spin", cycles)))
    fake = types.SimpleNamespace(
        device=torch.device("cuda"),
        request=types.SimpleNamespace(timing={"launch_allowance_ms": allowance}),
        candidate=lambda *args: calls.append(("candidate", args)) or "out",
    )
    assert Evaluation._call_as_if_timed(fake, [1, 2]) == "out"
    spin = [("spin", int(allowance * NOMINAL_SPIN_CYCLES_PER_MS))] if allowance else []
    assert calls == ["sync", *spin, ("candidate", (1, 2))]


def test_a_cpu_move_releases_nothing_and_waits_for_nothing():
    import torch

    from envs.worker.outcome import clone_args, move_to_fresh_placement

    inputs = [torch.randn(1 << 16)]
    placed = {"inputs": inputs, "anchor": clone_args(inputs)}
    assert move_to_fresh_placement(placed, inputs) == 0.0


class CachingPool:
    """A caching allocator in miniature: a request takes the smallest free cached block that fits (whole) or
    a new one from the driver; a block is free again once nothing holds what it backs."""

    def __init__(self, cached=(1,)):
        self.free, self.reserved = list(cached), sum(cached)
        self.created, self.created_while_timed, self.timing = 0, 0, False

    def tensor(self, size):
        class Tensor:
            pass

        fits = [b for b in self.free if b >= size]
        if fits:
            block = min(fits)
            self.free.remove(block)
        else:
            block = size
            self.reserved += size
            self.created += 1
            self.created_while_timed += self.timing
        t = Tensor()
        weakref.finalize(t, self.free.append, block)
        return t

    def output(self, name, size=1, temporary=0):
        out = self.tensor(size)
        if temporary:
            scratch = self.tensor(temporary)  # freed when the call returns
            del scratch
        out.name = name
        return out


class TimingFlagClock:
    def __init__(self, pool):
        self.pool = pool

    def settle(self):
        pass

    def measure(self, fn):
        self.pool.timing = True
        out = fn()
        self.pool.timing = False
        return 1.0, out

    def reserved(self):
        return self.pool.reserved


@pytest.mark.parametrize("min_warmup_runs", [1, 3])
def test_the_warm_up_leaves_the_allocator_what_the_timed_runs_need(min_warmup_runs):
    """The timed runs keep each output until the next call returns; a warm-up that dropped every output
    at once left a fresh pool one block short, and the first timed run paid for a new one (H200: +1 ms)."""
    from envs.timing import ANCHOR, KERNEL, interleaved_schedule, time_interleaved

    pool = CachingPool()
    fns = {KERNEL: lambda: pool.output(KERNEL), ANCHOR: lambda: pool.output(ANCHOR)}
    timed = time_interleaved(
        fns, interleaved_schedule(2, 1), clock=TimingFlagClock(pool), warmup_ms=0, min_warmup_runs=min_warmup_runs
    )
    assert pool.created == 1 and pool.created_while_timed == 0  # the second block came during the warm-up
    assert len(timed.samples[KERNEL]) == 2 and len(timed.samples[ANCHOR]) == 1
    assert timed.allocating == {KERNEL: 0, ANCHOR: 0}


def test_the_warm_up_goes_on_while_a_round_still_takes_memory_from_the_driver():
    """Eager max pooling allocates indices twice the size of its output and frees them on return: after one
    round the kernel's output sat in the indices' block, and every anchor run of a placement block paid for
    a new one (H200: 4.9 against 3.2 ms). The warm-up repeats rounds until one allocates nothing new."""
    from envs.timing import ANCHOR, KERNEL, interleaved_schedule, time_interleaved

    pool = CachingPool(cached=())  # a placement block's fresh pool
    fns = {KERNEL: lambda: pool.output(KERNEL), ANCHOR: lambda: pool.output(ANCHOR, temporary=2)}
    timed = time_interleaved(
        fns, interleaved_schedule(2, 1), clock=TimingFlagClock(pool), warmup_ms=0, min_warmup_runs=1
    )
    assert pool.created_while_timed == 0 and timed.allocating == {KERNEL: 0, ANCHOR: 0}


def test_timed_runs_that_still_take_memory_are_counted():
    """A callable whose every call keeps more memory (a growing cache) outlasts the warm-up's extra rounds:
    its timed runs are counted, not hidden."""
    from envs.timing import GROWTH_ROUNDS, KERNEL, time_interleaved

    pool = CachingPool(cached=())
    hoard = []
    timed = time_interleaved(
        {KERNEL: lambda: hoard.append(pool.tensor(1))},
        [KERNEL] * 5,
        clock=TimingFlagClock(pool),
        warmup_ms=0,
        min_warmup_runs=1,
    )
    assert len(hoard) == 1 + GROWTH_ROUNDS + 5 and timed.allocating == {KERNEL: 5}


class Pools:
    """A fresh CachingPool per placement block, as move_to_fresh_placement gives each block its own; blocks
    freed later return to the pool they came from. `clock.reserved` sums every pool's."""

    def __init__(self, spacer_every=0):
        self.all = [CachingPool(cached=())]
        self.calls, self.spacer_every = 0, spacer_every

    @property
    def current(self):
        return self.all[-1]

    def fresh(self):
        # with `spacer_every`, some pools hold a freed block already (a seeded spacer's, as in the worker)
        spacer = self.spacer_every and len(self.all) % self.spacer_every == 0
        self.all.append(CachingPool(cached=(2,) if spacer else ()))

    def output(self, name, temporary=0):
        self.calls += 1
        return self.current.output(name, temporary=temporary)


class PoolsClock(TimingFlagClock):
    def measure(self, fn):
        for p in self.pool.all:
            p.timing = True
        out = fn()
        for p in self.pool.all:
            p.timing = False
        return 1.0, out

    def reserved(self):
        return sum(p.reserved for p in self.pool.all)


@pytest.mark.parametrize("temporary, rounds", [(0, 1), (2, 2)])
def test_later_placement_blocks_warm_up_as_many_rounds_as_settled_the_second(temporary, rounds):
    """Every block's fresh pool grows in its first round, so a check per block would cost a confirming round
    in each of 48 blocks; the blocks repeat the second block's allocations, which tells how many they need."""
    from envs.timing import ANCHOR, KERNEL, placement_blocks, time_in_placements

    pools = Pools()
    fns = {KERNEL: lambda: pools.output(KERNEL), ANCHOR: lambda: pools.output(ANCHOR, temporary=temporary)}
    blocks = placement_blocks(20, 10, 10)
    timed = time_in_placements(fns, blocks, replace_inputs=pools.fresh, clock=PoolsClock(pools), warmup_ms=0)
    assert timed.allocating == {KERNEL: 0, ANCHOR: 0}
    assert sum(p.created_while_timed for p in pools.all) == 0
    # the first block: 3 rounds; the second: until settled, plus the confirming round; 8 more: `rounds` each
    assert pools.calls == 2 * (3 + (rounds + 1) + 8 * rounds) + 30


@pytest.mark.parametrize("temporary", [0, 2, 3])
def test_a_block_whose_pool_holds_a_spacers_block_needs_no_more_rounds_than_the_second(temporary):
    """The rule's premise: later blocks differ from the second only by free blocks a spacer left, which the
    runs can use but never need, so the second block's round count still leaves no timed run allocating."""
    from envs.timing import ANCHOR, KERNEL, placement_blocks, time_in_placements

    pools = Pools(spacer_every=3)
    fns = {KERNEL: lambda: pools.output(KERNEL), ANCHOR: lambda: pools.output(ANCHOR, temporary=temporary)}
    timed = time_in_placements(
        fns, placement_blocks(20, 10, 10), replace_inputs=pools.fresh, clock=PoolsClock(pools), warmup_ms=0
    )
    assert timed.allocating == {KERNEL: 0, ANCHOR: 0}


class CountingClock(PlacementClock):
    """PlacementClock whose kernel returns the number of its own timed run, so kept outputs can be told apart."""

    def __init__(self, factors: list[float]):
        super().__init__(factors)
        self.kernel_runs = 0

    def measure(self, fn):
        out = fn()
        if out == "kernel":
            self.kernel_runs += 1
            out = self.kernel_runs - 1
        self.order.append(out)
        return 0.5 * self.factors[self.placement], out


def test_an_enough_rule_ends_the_blocks_early_and_keep_minus_one_is_the_last_run_made():
    from envs.timing import KERNEL, placement_blocks, time_in_placements

    blocks = placement_blocks(100, 0, 10)  # 10 runs a block
    asked = []

    def enough(done, samples, ids):
        asked.append((done, len(samples[KERNEL]), sorted(set(ids[KERNEL]))))
        return done == 4

    clock = CountingClock([1.0] * 10)
    timed = time_in_placements(
        {KERNEL: lambda: "kernel"}, blocks, clock.moved, clock=clock, warmup_ms=0, keep=(3, 55, -1), enough=enough
    )
    assert asked == [(d, 10 * d, list(range(d))) for d in range(1, 5)]  # after each block, with the runs so far
    assert len(timed.samples[KERNEL]) == 40 and clock.placement == 3
    assert timed.kept == {3: 3, 39: 39}  # run 55 never happened; -1 is the 40th run, not the 100th


def test_a_blocks_host_time_is_split_into_its_parts_where_each_part_spends_it():
    import time

    from envs.timing import BLOCK_PARTS, KERNEL, placement_blocks, time_in_placements

    clock = PlacementClock([1.0] * 4)

    def slow_move():
        time.sleep(0.05)
        clock.moved()

    def slow_check(done, samples, ids):
        time.sleep(0.01)
        return False

    def kernel():
        time.sleep(0.001)
        return KERNEL

    blocks = placement_blocks(8, 0, 4)  # 2 timed runs a block; warm-up 3 calls in the first, 1 in the others
    timed = time_in_placements({KERNEL: kernel}, blocks, slow_move, clock=clock, warmup_ms=0, enough=slow_check)
    parts = timed.parts
    assert set(parts) == set(BLOCK_PARTS)
    assert parts["move"] >= 0.15  # three moves, none before the first block
    assert parts["check"] >= 0.03  # asked after every block but the last
    assert parts["runs"] >= 0.008 and parts["warmup"] >= 0.006  # 8 timed calls; 3 + 1 + 1 + 1 warm-up calls
    assert parts["runs"] < parts["move"] and parts["clock"] < 0.01


def test_a_later_blocks_warm_up_runs_through_the_settling_its_move_asked_for():
    """The GPU reads slow for a while after a move gave memory back (session 42: 15-20% for 10-20 ms on an
    H100); the next block's warm-up runs through it instead of the GPU idling first and then warming up."""
    import time

    from envs.timing import KERNEL, placement_blocks, time_in_placements

    clock = PlacementClock([1.0] * 3)
    settles = iter([0.03, None])  # the first move gave memory back, the second nothing (as on the CPU)
    calls = []

    def kernel():
        calls.append(clock.placement)
        time.sleep(0.002)
        return KERNEL

    def move():
        clock.moved()
        return next(settles)

    timed = time_in_placements({KERNEL: kernel}, placement_blocks(6, 0, 3), move, clock=clock, warmup_ms=0)
    warmups = [calls.count(b) - 2 for b in range(3)]  # each block's calls less its 2 timed runs
    assert warmups[0] == 3 and warmups[2] == 1  # the first block's 3; the last the rounds the second settled in
    assert 8 <= warmups[1] <= 16  # 30 ms of 2 ms calls, no round past the end of the settling
    assert timed.parts["warmup"] >= 0.03 + 4 * 0.002


def test_a_warm_up_stopped_by_its_run_cap_sleeps_the_rest_of_the_settling():
    import time

    from envs.timing import KERNEL, time_interleaved

    calls = []
    began = time.perf_counter()
    timed = time_interleaved(
        {KERNEL: lambda: calls.append(1)},
        [KERNEL],
        clock=PlacementClock([1.0]),
        warmup_ms=0,
        max_warmup_runs=2,
        min_warmup_runs=1,
        until_settled=False,
        busy_until=began + 0.05,
    )
    assert len(calls) == 2 + 1 and timed.warmup_seconds >= 0.045


def test_without_a_stop_keep_minus_one_is_the_last_of_all_runs_and_the_last_block_is_never_asked_about():
    from envs.timing import KERNEL, placement_blocks, time_in_placements

    asked = []
    clock = CountingClock([1.0] * 3)
    timed = time_in_placements(
        {KERNEL: lambda: "kernel"},
        placement_blocks(30, 0, 3),
        clock.moved,
        clock=clock,
        warmup_ms=0,
        keep=(-1,),
        enough=lambda done, samples, ids: asked.append(done) or False,
    )
    assert asked == [1, 2] and timed.kept == {29: 29}


def test_sequential_timing_stops_a_steady_kernel_early_and_times_a_placement_sensitive_one_fully():
    import random

    from envs.speedup import relative_half_width
    from envs.timing import ANCHOR, KERNEL, placement_blocks, time_in_placements

    rng = random.Random(0)

    def run(spread):
        factors = [1 + rng.uniform(-spread, spread) for _ in range(48)]
        clock = PlacementClock(factors)
        done = []

        def enough(blocks, samples, ids):
            if blocks < 12 or (blocks - 12) % 4:
                return False
            done.append(blocks)
            return relative_half_width(samples[KERNEL], ids[KERNEL], samples[ANCHOR], ids[ANCHOR]) <= 0.01

        fns = {KERNEL: lambda: KERNEL, ANCHOR: lambda: ANCHOR}
        timed = time_in_placements(
            fns, placement_blocks(100, 50, 48), clock.moved, clock=clock, warmup_ms=0, enough=enough
        )
        return len(set(timed.blocks[KERNEL]))

    assert run(0.001) == 12  # placement moves it 0.1%: the first check already fixes the speedup
    assert run(0.15) == 48  # 15%: never tight enough to stop before the last block


class NamedClock(QuietClock):
    """Times a call by the name of the callable it ran (the test wraps each to return its name): the anchor 2 ms,
    the timed callable 1 ms."""

    def measure(self, fn):
        from envs.timing import ANCHOR

        out = fn()
        return (2.0 if out == ANCHOR else 1.0), out


def test_what_runs_after_the_timed_blocks_shares_their_exclusive_hold(monkeypatch):
    """The candidate's tail check (host_tail_ms) runs inside the timed runs' hold: an exclusive hold of its own
    would first wait for the other workers' trials in flight to end, once more per evaluation."""
    import contextlib
    import types

    from envs.timing import KERNEL, time_in_placements
    from envs.worker import timing_phase

    monkeypatch.setattr(
        timing_phase,
        "time_in_placements",
        lambda fns, blocks, replace_inputs, **kwargs: time_in_placements(
            {k: (lambda: KERNEL) for k in fns}, blocks, replace_inputs, clock=NamedClock(), **kwargs
        ),
    )
    held, holds, seen = [], [], []

    class Phase(timing_phase.TimingPhase):
        request = types.SimpleNamespace(timing={"runs": 10, "warmup_ms": 0.0, "anchor_runs": 0, "placements": 1})

        def __init__(self):
            self.facts = {}

        @contextlib.contextmanager
        def _gpu(self, mode):
            holds.append(mode)
            held.append(mode)
            yield
            held.pop()

        def _step(self, name, began):
            pass

    Phase()._in_placements({KERNEL: lambda: None}, None, then=lambda: seen.append(list(held)))
    assert seen == [["exclusive"]] and holds == ["exclusive"]


@pytest.mark.parametrize("precision,anchor_runs", [(0.0, 50), (0.01, 14)])
def test_the_anchor_reference_is_eager_timed_in_a_candidates_blocks_as_both_callables(
    monkeypatch, precision, anchor_runs
):
    """issue 32: with the baselines, eager is timed as a candidate is (its placement blocks, its stopping rule:
    eager against itself is steady, so sequential timing stops at the first check, 12 blocks and 14 anchor runs),
    as the timed callable and as the anchor; the reference is the anchor's statistics."""
    import contextlib
    import types

    import torch

    from envs.speedup import ANCHOR_REFERENCE
    from envs.timing import ANCHOR, BLOCK_PARTS, KERNEL, placement_blocks, time_in_placements
    from envs.worker import timing_phase

    calls = []

    def timed_by_name(fns, blocks, replace_inputs, **kwargs):
        calls.append((sorted(fns), blocks, replace_inputs is not None, kwargs["enough"]))
        named = {name: (lambda f=f, name=name: (f(), name)[1]) for name, f in fns.items()}
        return time_in_placements(named, blocks, replace_inputs, clock=NamedClock(), **kwargs)

    monkeypatch.setattr(timing_phase, "time_in_placements", timed_by_name)
    timing = {
        "runs": 100,
        "warmup_ms": 0.0,
        "anchor_runs": 50,
        "placements": 48,
        "precision": precision,
        "min_placements": 12,
    }
    copies = []

    class Phase(timing_phase.TimingPhase):
        request = types.SimpleNamespace(timing=timing, timing_seed=3, baselines=["eager", ANCHOR_REFERENCE])

        def __init__(self):
            self.facts, self.notes = {}, []

        def model(self, x):
            copies.append(x)
            return x * 2

        def _gpu(self, mode):
            holds.append(mode)
            return contextlib.nullcontext()

        def _enter_phase(self, name):
            pass

        def _inputs(self, seed):
            return [torch.ones(4)]

        def _step(self, name, began):
            self.facts.setdefault("steps", {})[name] = 1.0

        def _add_step(self, name, seconds):
            self.facts.setdefault("steps", {})[name] = seconds

        def _note_memory(self, step=None):
            pass

    holds = []
    phase = Phase()
    results = phase.time_baselines()
    eager, reference = calls
    assert eager == ([KERNEL], placement_blocks(100, 0, 1), False, None)  # back to back, as before
    assert reference == ([ANCHOR, KERNEL], placement_blocks(100, 50, 48), True, phase._precise_enough)
    assert results["eager"]["median_ms"] == 1.0 and results["eager"]["runs"] == 100
    assert results[ANCHOR_REFERENCE]["median_ms"] == 2.0 and results[ANCHOR_REFERENCE]["runs"] == anchor_runs
    assert "baseline.anchor_reference" in phase.facts["steps"]  # its cost, reported apart
    assert phase.facts["steps"]["baseline.release_settle"] == 0.0  # the moves' settling: none for memory on the CPU
    # the inputs made under a shared hold; eager's blocks in one exclusive hold; the anchor reference's two copies
    # in one shared hold, then its blocks in one exclusive hold, the moves inside it (taken per block, the hold
    # queued behind other workers' correctness trials each time: docs/gpu-notes.md, session 47)
    assert holds == ["shared", "exclusive", "shared", "exclusive"]
    assert set(phase.facts["steps"]) >= {f"baseline.anchor_reference.{part}" for part in BLOCK_PARTS}
    assert "kernel_samples" not in phase.facts and "anchor" not in phase.facts  # not the candidate's facts
    assert len({id(x) for x in copies}) > 2  # the inputs moved between blocks, the anchor on copies of its own
    # re-anchoring off: no anchor to judge, no reference timed
    calls.clear()
    timing["anchor_runs"] = 0
    assert ANCHOR_REFERENCE not in Phase().time_baselines() and len(calls) == 1


def test_a_blocks_outputs_are_freed_before_the_next_block_but_for_the_kept_probe_run():
    import gc
    import weakref

    from envs.timing import ANCHOR, KERNEL, placement_blocks, time_in_placements

    class Output:  # a full-size output stands in: only whether it is still alive matters
        pass

    made: list[weakref.ref] = []

    def kernel():
        out = Output()
        made.append(weakref.ref(out))
        return out

    class Clock(QuietClock):
        def measure(self, fn):
            return 1.0, fn()

    alive_at_moves = []

    def replace_inputs():
        gc.collect()
        alive_at_moves.append(sum(r() is not None for r in made))

    timed = time_in_placements(
        {KERNEL: kernel, ANCHOR: Output},
        placement_blocks(30, 15, 3),
        replace_inputs,
        clock=Clock(),
        warmup_ms=0,
        keep=(4, -1),
    )
    # when the inputs move, the candidate's outputs still alive are the kept probe run's alone (run 4 is in block
    # 0): the previous block's last run, kept in case it was the last of all, is dropped with that block
    assert alive_at_moves == [1, 1]
    assert set(timed.kept) == {4, 29}


def test_sequential_timing_judges_the_kernel_alone_where_the_anchor_shows_no_drift():
    """Session 39 (H100): softmax's eager anchor, one run a block, kept its interval wider than ±3% through all 48
    blocks, though the kernel alone was within it after 12. Where the drift test will keep the anchor out of the
    speedup (its runs hold the cached reference), the stopping rule asks about the kernel's runs only (here, at
    ±1%: 0.2% for the kernel alone against 2.8% with the anchor)."""
    import random
    import types

    from envs.timing import ANCHOR, KERNEL
    from envs.worker import timing_phase

    rng = random.Random(0)
    samples = {KERNEL: [], ANCHOR: []}
    ids = {KERNEL: [], ANCHOR: []}
    for b in range(12):
        samples[KERNEL] += [0.5 * (1 + rng.uniform(-0.005, 0.005)) for _ in range(2)]
        ids[KERNEL] += [b, b]
        samples[ANCHOR].append(1.0 * (1 + rng.uniform(-0.1, 0.1)))  # its own placement noise, ±10% a block
        ids[ANCHOR].append(b)

    def phase(**timing):
        class Phase(timing_phase.TimingPhase):
            request = types.SimpleNamespace(timing={"precision": 0.01, "min_placements": 12, **timing})

        return Phase()

    assert phase(drift_test=True, anchor_reference_ms=1.0)._precise_enough(12, samples, ids)
    assert not phase(drift_test=False, anchor_reference_ms=1.0)._precise_enough(12, samples, ids)
    assert not phase(drift_test=True)._precise_enough(12, samples, ids)  # no reference yet: the anchor decides
    measured = phase(drift_test=True, anchor_reference_ms=None)
    measured.measured_reference_ms = 1.0  # the reference this request timed with the baselines
    assert measured._precise_enough(12, samples, ids)
    # A GPU 10% slower than when the reference was timed: the anchor decides again.
    assert not phase(drift_test=True, anchor_reference_ms=0.9)._precise_enough(12, samples, ids)


@pytest.mark.parametrize(
    "case", ["honest", "partial_key_cache", "probe_not_passed", "integer_inputs", "reference_not_finite"]
)
def test_a_few_elements_moved_in_place_expose_a_cache_keyed_on_part_of_the_input(case):
    """After the dense refill, the re-checks move the probe's few elements of the same tensors in place and call
    again: an honest candidate passes, one whose cache key reads only the first element returns a stale output
    (output_caching); nothing runs where the probe did not pass (no move size), no input is floating point, or
    the move leaves the reference's output holding NaN or Inf (the probe skips then too: no verdict stands on
    such an output)."""
    import types

    import torch

    from envs import inputs as families
    from envs.antihack.runtime import RuntimeHack
    from envs.compare import outputs_match
    from envs.worker import timing_phase

    torch.manual_seed(0)
    cache = {}

    def candidate(x):  # the key reads x[1], which seed 7's moves leave alone (they are at 0, 7, 211, ...)
        key = (x.data_ptr(), float(x[1]))
        if case == "partial_key_cache" and key in cache:
            return cache[key].clone()
        cache[key] = out = x.cumsum(0)
        return out

    calls = []

    class Phase(timing_phase.TimingPhase):
        request = types.SimpleNamespace(problem={}, seeds=[7])
        device = torch.device("cpu")
        base_rms = [1.0]
        probe_times = None if case == "probe_not_passed" else families.PROBE_SIZES[0]

        def _reference(self, inputs):
            out = inputs[0].cumsum(0)
            if case == "reference_not_finite":  # a second output turns Inf once the elements moved (a log might)
                return out, torch.tensor([0.0 if torch.equal(inputs[0], kept) else float("inf")])
            return out

        def _guarded_call(self, inputs, what, template=None, pristine=None):
            assert all(torch.equal(p, x) for p, x in zip(pristine, inputs))  # the copy follows the move
            calls.append(what)
            return candidate(*inputs)

        def _compare(self, expected, got, label, inputs, hack_category=None, atol_scales=None):
            if not outputs_match(expected, got):
                raise RuntimeHack(hack_category, label)

    x = torch.randn(1000, dtype=torch.float64) if case != "integer_inputs" else torch.arange(1000)
    before = candidate(x)  # the refill's call: the cache now holds this tensor's result
    kept = x.clone()
    if case == "partial_key_cache":
        with pytest.raises(RuntimeHack, match="moved in place"):
            Phase()._moved_in_place([x], [x.clone()], before)
    else:
        Phase()._moved_in_place([x], [x.clone()], before)
    assert torch.equal(x, kept)  # the moved elements are put back
    assert len(calls) == (1 if case in ("honest", "partial_key_cache") else 0)
