"""scripts/bench_eval_ops.py's attribution of profiled events to an evaluation's phases and steps."""

from scripts.bench_eval_ops import attribute


def test_an_event_goes_to_the_step_it_started_in_else_its_phase_else_between():
    intervals = [
        ("load", 0.0, 1.0),
        ("correctness", 1.0, 5.0),
        ("correctness.first_trial", 1.5, 2.0),
        ("correctness.trials", 2.0, 4.0),
        ("timing", 6.0, 8.0),
    ]
    events = [
        (0.5, 0.1, "randn"),
        (1.2, 0.2, "copy"),  # in correctness, before its first step
        (1.6, 0.3, "relu"),
        (2.5, 0.4, "relu"),
        (3.9, 0.5, "compare"),
        (4.5, 0.6, "copy"),  # after the last step, still correctness
        (5.5, 0.7, "sync"),  # between two phases
        (7.0, 0.8, "kernel"),
    ]
    report = attribute(intervals, events)
    parts = report["parts"]
    assert parts["load"]["device_s"] == 0.1  # a phase without steps keeps its own name
    assert parts["correctness.other"]["ops"] == [{"name": "copy", "calls": 2, "seconds": 0.8}]
    assert parts["correctness.first_trial"]["ops"] == [{"name": "relu", "calls": 1, "seconds": 0.3}]
    assert [op["name"] for op in parts["correctness.trials"]["ops"]] == ["compare", "relu"]
    assert parts["between"] == {"wall_s": None, "device_s": 0.7, "ops": [{"name": "sync", "calls": 1, "seconds": 0.7}]}
    assert parts["correctness.trials"]["wall_s"] == 2.0 and parts["correctness.other"]["wall_s"] is None
    assert list(parts)[0] == "correctness.trials"  # the parts by device time, most first
    assert report["phases"] == {
        "load": {"wall_s": 1.0, "device_s": 0.1},
        "correctness": {"wall_s": 4.0, "device_s": 2.0},  # its steps and what ran outside them
        "timing": {"wall_s": 2.0, "device_s": 0.8},
    }
