def test_workers_and_threads_follow_the_cores_this_process_may_use(monkeypatch):
    from daca_bench.experiments.grid import jobs

    monkeypatch.setattr(jobs.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert jobs.split_cores(8) == (1, 1)  # taskset -c 0 on a 2-core machine: one worker, one thread
    monkeypatch.setattr(jobs.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert jobs.split_cores(8, 2) == (2, 2) and jobs.split_cores(1) == (1, 4)


def test_the_time_left_waits_for_a_measured_pace():
    """No bound before the jobs have logged progress for a few seconds (the first '~1:44:23 left at
    most' of a 25 s stage came from start-up time counted as pace); then the pace since the first
    progress, not since the start."""
    from daca_bench.experiments.grid.jobs import Pace

    now = [0.0]
    pace = Pace(total=100, min_s=5, clock=lambda: now[0])
    now[0] = 20.0  # 20 s of worker start-up, no step yet
    assert pace.left(0, 0) == ""
    now[0] = 21.0
    assert pace.left(2, 0, "left at most") == ""  # the first progress: the pace starts here
    now[0] = 24.0
    assert pace.left(8, 0) == ""  # 3 s of pace: not yet measured
    now[0] = 31.0
    assert pace.left(22, 0, "left at most") == "~00:39 left at most"  # 20 units in 10 s, 78 to go
