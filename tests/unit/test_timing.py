

def test_runs_are_split_evenly_over_placements_and_never_into_empty_blocks():
    from envs.timing import split_runs

    assert split_runs(100, 3) == [34, 33, 33]
    assert split_runs(50, 3) == [17, 17, 16]
    assert split_runs(2, 3) == [1, 1]
    assert split_runs(7, 1) == [7]
    assert sum(split_runs(101, 4)) == 101
