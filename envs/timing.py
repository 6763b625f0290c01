"""GPU timing with CUDA events: warm-up, then timed runs each preceded by an L2 flush.

Runs inside the worker while it holds the GPU exclusively. The end event is recorded on the calling
stream right after the call returns, the same way for baselines and candidates; then a device-wide
synchronize, so work left on any stream is finished before the next run starts. Work on other streams
is therefore not in the events: the harness refuses it (launch streams, host-clock tail check).

Re-anchoring: `time_interleaved` times several callables in one window, their runs interleaved by a
schedule (`interleaved_schedule`), so a baseline timed beside the candidate sees the same GPU state
(clocks, temperature, neighbours) as the candidate. The clock is a parameter, so the scheduling and
bookkeeping run in unit tests with a synthetic clock.

Placements: `time_in_placements` splits the runs into blocks (`placement_blocks`), the inputs moved to
fresh addresses before each block after the first, and reports the block of every sample, which the
speedup's interval resamples as a unit (envs/speedup.py). A caller's `enough` rule may end the blocks early
once the samples so far fix what they are for (sequential timing, envs/worker/timing_phase.py).

Launch overhead: by default the start event is recorded, then the host launches the call, so the events hold
the host's launch time too (KernelBench's way); for a launch-bound kernel that is most of the sample, and it
moves with the load of a shared host. With a launch allowance (`QueuedCudaClock`) the start event waits behind
a spin kernel while the host enqueues the call, so the events hold the call's device work, and its host time
only where it outlasts the spin (at most the allowance).
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses
import functools
import time
from typing import Any, Callable, Protocol

import torch

KERNEL = "kernel"  # the schedule's name for the candidate
ANCHOR = "anchor"  # ... and for the baseline timed beside it
# Warm-up rounds added while a round still takes memory from the driver: a steady allocation pattern settles
# in one or two; a callable that keeps taking more (a growing cache) is timed as it is after these.
GROWTH_ROUNDS = 4
# How a verdict's note says that timed runs still took memory from the driver (scripts/bench_eval.py counts them)
ALLOCATING_NOTE = "took device memory from the driver inside their timed window"
# ... and that a candidate's timed runs spent more host time than the launch allowance hides
EXPOSED_NOTE = "spent more host time than the launch allowance"


class Clock(Protocol):
    def settle(self) -> None:
        """Wait until nothing of a previous call is still running."""

    def measure(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        """Milliseconds one call of `fn` took, and what it returned."""

    def reserved(self) -> int:
        """Bytes the allocator holds from the driver: it grows when a call needs memory no cached block has."""


def flush_buffer(device: torch.device) -> torch.Tensor:
    """A buffer twice the size of the L2 cache; zeroing it evicts whatever the last run left there."""
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20) or (64 << 20)
    return torch.empty(2 * l2, dtype=torch.uint8, device=device)


class CudaClock:
    """CUDA events on the calling stream around the call; L2 flushed and the device idle before each."""

    def __init__(self) -> None:
        self.flush = flush_buffer(torch.device("cuda", torch.cuda.current_device()))

    def settle(self) -> None:
        torch.cuda.synchronize()

    def measure(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.flush.zero_()
        torch.cuda.synchronize()
        spin = self._queue(fn)
        began = time.perf_counter()
        begin.record()
        out = fn()
        end.record()
        self._launched(fn, spin, (time.perf_counter() - began) * 1e3)
        torch.cuda.synchronize()
        return begin.elapsed_time(end), out

    def _queue(self, fn: Callable[[], Any]) -> float:
        """What the device runs between the synchronization and the start event (ms): nothing here."""
        return 0.0

    def _launched(self, fn: Callable[[], Any], spun_ms: float, host_ms: float) -> None:
        """The host time from the start event to the end event's launch: not used here."""

    def reserved(self) -> int:
        return torch.cuda.memory_reserved()  # every pool of the device, the placement blocks' private ones too


# A queued clock's spin: this many times the longest host time of the callable's last few calls (its first
# call spins the whole allowance), at least MIN_SPIN_MS, at most the allowance.
SPIN_MARGIN = 2.0
MIN_SPIN_MS = 0.02
HOST_HISTORY = 8
# Cycles a millisecond at a ~2 GHz SM clock: for spins whose length only needs to be about right
NOMINAL_SPIN_CYCLES_PER_MS = 2_000_000


def spin_ms(allowance_ms: float, recent_host_ms: collections.abc.Iterable[float] = ()) -> float:
    """How long a queued clock spins before a call whose recent calls took `recent_host_ms` of host time
    (none yet: the whole allowance)."""
    seen = list(recent_host_ms)
    wanted = SPIN_MARGIN * max(seen) if seen else allowance_ms
    return min(allowance_ms, max(MIN_SPIN_MS, wanted))


@functools.lru_cache(maxsize=None)
def spin_cycles_per_ms(device: int) -> float:
    """Clock cycles of `torch.cuda._sleep` per millisecond on `device`, measured with events (the fastest of
    three: a spin never reads shorter than its cycles take at the highest clock)."""
    rates = []
    for _ in range(3):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        begin.record()
        torch.cuda._sleep(1_000_000)
        end.record()
        torch.cuda.synchronize(device)
        rates.append(1_000_000 / max(begin.elapsed_time(end), 1e-6))
    return max(rates)


class QueuedCudaClock(CudaClock):
    """A CudaClock whose start event is queued behind a spin kernel: the host enqueues the call while the device
    still spins, so the events measure the call's device work, without the Python and launch time the host
    spends on it, up to the spin's length. Host time beyond the spin leaves the device idle inside the events
    and is counted, and so is host work after anything that waits for the device (reading an input on the
    host synchronizes with the spin first). The spin lasts SPIN_MARGIN times the longest host time of the
    callable's recent calls (`host_ms`, kept across a timing's blocks), at most `allowance_ms`."""

    def __init__(self, allowance_ms: float, host_ms: dict[Callable[[], Any], collections.deque] | None = None):
        super().__init__()
        self.allowance_ms = allowance_ms
        self.host_ms = {} if host_ms is None else host_ms
        self.cycles_per_ms = spin_cycles_per_ms(torch.cuda.current_device())
        # timed runs of each callable whose host time outlasted their spin (so partly counted in their sample)
        self.exposed: collections.Counter = collections.Counter()

    def _queue(self, fn: Callable[[], Any]) -> float:
        spin = spin_ms(self.allowance_ms, self.host_ms.get(fn, ()))
        torch.cuda._sleep(int(spin * self.cycles_per_ms))
        return spin

    def _launched(self, fn: Callable[[], Any], spun_ms: float, host_ms: float) -> None:
        self.host_ms.setdefault(fn, collections.deque(maxlen=HOST_HISTORY)).append(host_ms)
        self.exposed[fn] += host_ms > spun_ms


def interleaved_schedule(runs: int, anchor_runs: int) -> list[str]:
    """The order of timed runs: the candidate's `runs` with `anchor_runs` baseline runs spread evenly among
    them (one every runs/anchor_runs candidate runs, the first before any candidate run), so both sample
    the whole window and any drift inside it lands on both alike."""
    if runs < 1 or anchor_runs < 0:
        raise ValueError("runs must be >= 1 and anchor_runs >= 0")
    schedule: list[str] = []
    placed = 0
    for i in range(runs):
        while placed < anchor_runs and placed * runs <= i * anchor_runs:
            schedule.append(ANCHOR)
            placed += 1
        schedule.append(KERNEL)
    schedule += [ANCHOR] * (anchor_runs - placed)
    return schedule


@dataclasses.dataclass
class TimedRuns:
    samples: dict[str, list[float]]  # ms per run, by callable name, in the order they ran
    kept: dict[int, Any]  # outputs of the candidate's timed runs named in `keep` (by its run index)
    seconds: dict[str, float]  # host wall time spent on each callable (warm-up included)
    # timed runs of each callable during which the allocator took memory from the driver (0 once warm)
    allocating: dict[str, int] = dataclasses.field(default_factory=dict)
    settled_after: int = 0  # the last warm-up round that took memory from the driver (0: none did)
    warmup_seconds: float = 0.0  # host wall time of the warm-up, of all callables


def time_interleaved(
    fns: dict[str, Callable[[], Any]],
    schedule: list[str],
    clock: Clock | None = None,
    warmup_ms: float = 25.0,
    max_warmup_runs: int = 50,
    keep: tuple[int, ...] = (),
    min_warmup_runs: int = 3,
    until_settled: bool = True,
    busy_until: float = 0.0,
) -> TimedRuns:
    """Warm each callable up, then run `schedule` (names of `fns`), timing every run with `clock`.

    The warm-up takes the callables in turn, in the schedule's order, each call's output kept alive until
    the next returns, as in the timed runs: so the allocator already holds what the timed runs need (one
    output alive while the next call allocates its own). Warmed up one callable at a time, with each
    output dropped at once, a fresh pool held one output block, and the first timed run after the other
    callable's had to get a second from the driver inside its timed window, slowing the first kernel run of
    each placement block by about half (docs/gpu-notes.md).

    With `until_settled` the warm-up does not stop while a round of calls still takes memory from the
    driver (`Clock.reserved` grew; at most `GROWTH_ROUNDS` more rounds): a callable with a temporary larger
    than its output (eager max pooling's indices) left a fresh pool without a free block of that size after
    one round, and with one anchor run per placement block every anchor run paid for a driver allocation,
    inflating the speedup (docs/gpu-notes.md). `TimedRuns.settled_after` says how
    many rounds it took, `TimedRuns.allocating` counts timed runs that still grew it.

    `busy_until` (a time.perf_counter() instant) keeps the warm-up making rounds until then: the GPU reads slow
    for a while after memory went back to the driver (envs/gpu_lock.py), and rounds made meanwhile cost no more
    than idling through it; where `max_warmup_runs` stops them first, the rest is slept."""
    clock = clock or CudaClock()
    seconds = dict.fromkeys(fns, 0.0)
    order = list(dict.fromkeys([n for n in schedule if n in fns] + list(fns)))
    runs = dict.fromkeys(fns, 0)
    start = time.perf_counter()
    out = None
    # At least `min_warmup_runs` each and about `warmup_ms` of work per callable (JIT compiles, autotuning,
    # allocator growth), as when each was warmed up on its own; then until a round allocates nothing new.
    budget_ms = warmup_ms * len(order)
    growth_rounds = rounds = settled_after = 0
    while True:
        before = clock.reserved()
        rounds += 1
        for name in order:
            began = time.perf_counter()
            out = fns[name]()  # the last output stays alive through the next call, as below
            clock.settle()
            seconds[name] += time.perf_counter() - began
            runs[name] += 1
        grew = clock.reserved() > before
        settled_after = rounds if grew else settled_after
        now = time.perf_counter()
        if any(runs[n] < min_warmup_runs for n in order) or (
            max(runs.values()) < max_warmup_runs and ((now - start) * 1e3 < budget_ms or now < busy_until)
        ):
            continue
        if until_settled and grew and growth_rounds < GROWTH_ROUNDS:
            growth_rounds += 1
            continue
        break
    if (left := busy_until - time.perf_counter()) > 0:
        time.sleep(left)
    warmup_seconds = time.perf_counter() - start
    samples: dict[str, list[float]] = {name: [] for name in fns}
    allocating = dict.fromkeys(fns, 0)
    kept: dict[int, Any] = {}
    for name in schedule:
        began = time.perf_counter()
        before = clock.reserved()
        ms, out = clock.measure(fns[name])
        allocating[name] += clock.reserved() > before
        seconds[name] += time.perf_counter() - began
        if name == KERNEL and len(samples[name]) in keep:
            kept[len(samples[name])] = out
        samples[name].append(ms)  # `out` stays alive until the next run returns, as in a benchmark loop
    return TimedRuns(samples, kept, seconds, allocating, settled_after, warmup_seconds)


def split_runs(runs: int, parts: int) -> list[int]:
    """`runs` shared among `parts` blocks as evenly as possible (earlier blocks take the remainder)."""
    parts = max(1, min(parts, runs))
    return [runs // parts + (1 if i < runs % parts else 0) for i in range(parts)]


@dataclasses.dataclass(frozen=True)
class Block:
    """One input placement's share of the timed runs: the candidate's and the anchor's."""

    runs: int
    anchor_runs: int


def placement_blocks(runs: int, anchor_runs: int, placements: int) -> list[Block]:
    """The candidate's `runs` over at most `placements` blocks (never an empty one), the anchor's runs
    over the same blocks; with fewer anchor runs than blocks the last blocks have none."""
    kernel = split_runs(runs, placements)
    anchors = split_runs(anchor_runs, len(kernel)) if anchor_runs else []
    return [Block(r, a) for r, a in zip(kernel, anchors + [0] * (len(kernel) - len(anchors)))]


def block_warmup(block: int, warmup_ms: float, rounds: int | None = None, busy_until: float = 0.0) -> dict[str, Any]:
    """time_interleaved's warm-up for placement block `block`. The first warms up fully. Later ones start from
    the same state (the same inputs copied into a fresh pool) and make the same calls, so the second block
    calls each callable in turn until a round takes no memory from the driver, and the others run the
    `rounds` that took (its `settled_after`): the new addresses' first touch and the pool filled, at one
    round for most problems instead of the confirming extra one in each of 48 blocks. Later blocks go on
    until `busy_until`, the end of the settling their move's release asked for."""
    if block == 0:
        return {"warmup_ms": warmup_ms, "min_warmup_runs": 3}
    if rounds is None:
        return {"warmup_ms": 0.0, "min_warmup_runs": 1, "busy_until": busy_until}
    return {"warmup_ms": 0.0, "min_warmup_runs": max(1, rounds), "until_settled": False, "busy_until": busy_until}


@dataclasses.dataclass
class PlacedRuns(TimedRuns):
    # the placement block of each sample in `samples`, by callable name
    blocks: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    # with a launch allowance: timed runs of each callable whose host time outlasted the spin before them
    exposed: dict[str, int] = dataclasses.field(default_factory=dict)
    # host wall time of the blocks by part (BLOCK_PARTS): where a timing's GPU hold goes besides the timed runs
    parts: dict[str, float] = dataclasses.field(default_factory=dict)


# A placement block's parts: moving the inputs (their copies), making its clock (the flush buffer), the warm-up
# (running through the settling the move's release asked for), the timed runs, and the caller's `enough` rule.
BLOCK_PARTS = ("move", "clock", "warmup", "runs", "check")


def time_in_placements(
    fns: dict[str, Callable[[], Any]],
    blocks: list[Block],
    replace_inputs: Callable[[], float | None] | None = None,
    clock: Clock | None = None,
    warmup_ms: float = 25.0,
    keep: tuple[int, ...] = (),
    enough: Callable[[int, dict[str, list[float]], dict[str, list[int]]], bool] | None = None,
    launch_allowance_ms: float = 0.0,
) -> PlacedRuns:
    """Time the candidate (`fns[KERNEL]`) and, where a block has anchor runs, `fns[ANCHOR]` interleaved
    with it, block after block; `replace_inputs` moves the inputs to fresh addresses before every block
    after the first, and may return for how many seconds the GPU still settles after the memory it gave back
    (envs/gpu_lock.py): the block's warm-up runs that long at least. Only the first block warms up fully (later
    ones as `block_warmup` says). `keep` counts
    the candidate's runs over all blocks, as in time_interleaved; -1 in it keeps the last run made.
    `enough(blocks_done, samples, blocks)`, asked after each block, ends the runs early when it says so.
    With `launch_allowance_ms` (and no `clock`) the runs are timed by a QueuedCudaClock with
    that allowance, its record of host times kept across the blocks."""
    if len(blocks) > 1 and replace_inputs is None:
        raise ValueError("more than one placement block needs replace_inputs")
    # Without `clock` each block makes its own CudaClock (its flush buffer allocated after the block's
    # inputs, freed after its runs), as when placements were measured on the H200: the same sequence of
    # allocations, so the inputs land as they did then.
    host_ms: dict[Callable[[], Any], collections.deque] = {}
    samples: dict[str, list[float]] = {name: [] for name in fns}
    ids: dict[str, list[int]] = {name: [] for name in fns}
    kept: dict[int, Any] = {}
    seconds = dict.fromkeys(fns, 0.0)
    allocating = dict.fromkeys(fns, 0)
    exposed = dict.fromkeys(fns, 0)
    parts = dict.fromkeys(BLOCK_PARTS, 0.0)
    rounds: int | None = None  # the warm-up rounds that settled the second block's pool (block_warmup)
    last: Any = None  # the output of the last run made, for keep's -1
    for b, block in enumerate(blocks):
        offset = len(samples[KERNEL])
        move_began = time.perf_counter()
        settling = 0.0
        if b:
            last = None  # another block runs, so its last run is the one kept: one full output less held
            settling = replace_inputs() or 0.0
        moved = time.perf_counter()
        parts["move"] += moved - move_began
        wanted = {k - offset for k in keep if offset <= k < offset + block.runs}
        allowed = clock is None and launch_allowance_ms > 0
        queued = QueuedCudaClock(launch_allowance_ms, host_ms) if allowed else None
        block_clock = clock or queued or CudaClock()
        runs_began = time.perf_counter()
        parts["clock"] += runs_began - moved
        timed = time_interleaved(
            {k: f for k, f in fns.items() if k == KERNEL or block.anchor_runs},
            interleaved_schedule(block.runs, block.anchor_runs),
            clock=block_clock,
            **block_warmup(b, warmup_ms, rounds, busy_until=moved + settling),
            keep=tuple(sorted(wanted | ({block.runs - 1} if -1 in keep else set()))),
        )
        block_clock = None  # a CudaClock's flush buffer freed after its runs (a queued one stays for `exposed`)
        parts["warmup"] += timed.warmup_seconds
        parts["runs"] += time.perf_counter() - runs_began - timed.warmup_seconds
        if b == 1:
            rounds = timed.settled_after
        for name, xs in timed.samples.items():
            samples[name] += xs
            ids[name] += [b] * len(xs)
            seconds[name] += timed.seconds[name]
            allocating[name] += timed.allocating[name]
            exposed[name] += queued.exposed[fns[name]] if queued else 0
        kept.update({offset + k: out for k, out in timed.kept.items() if k in wanted})
        last = timed.kept.get(block.runs - 1)
        timed = None  # else its outputs, the last run's among them, stay alive through the next block
        check_began = time.perf_counter()
        done = enough is not None and b + 1 < len(blocks) and enough(b + 1, samples, ids)
        parts["check"] += time.perf_counter() - check_began
        if done:
            break
    if -1 in keep:
        kept[len(samples[KERNEL]) - 1] = last
    return PlacedRuns(samples, kept, seconds, allocating, blocks=ids, exposed=exposed, parts=parts)


def time_cuda(
    fn: Callable[[], Any],
    runs: int = 100,
    warmup_ms: float = 25.0,
    max_warmup_runs: int = 50,
    keep: tuple[int, ...] = (),
) -> tuple[list[float], dict[int, Any]]:
    """Per-run times in ms of `fn` alone, and the outputs of the timed runs in `keep`."""
    timed = time_interleaved(
        {KERNEL: fn}, [KERNEL] * runs, warmup_ms=warmup_ms, max_warmup_runs=max_warmup_runs, keep=keep
    )
    return timed.samples[KERNEL], timed.kept


def host_tail_ms(fn: Callable[[], Any], runs: int = 10) -> tuple[float, float]:
    """Least host-clock time from `fn` returning to a full device synchronization finishing (the device
    work on every stream still running when the call returned), and the same for a one-element kernel
    as a control: the platform's own launch-to-sync latency, which can reach a millisecond in a VM.
    Host-side overhead (Python, launches) happens before the return, so it cannot inflate the tail;
    alternating the two and keeping the minimum drops scheduling noise."""
    tick = torch.zeros(1, device=torch.device("cuda", torch.cuda.current_device()))
    tails: list[float] = []
    controls: list[float] = []
    for _ in range(runs):
        for work, samples in ((fn, tails), (tick.zero_, controls)):
            torch.cuda.synchronize()
            work()
            t0 = time.perf_counter()
            torch.cuda.synchronize()
            samples.append((time.perf_counter() - t0) * 1e3)
    return min(tails), min(controls)
