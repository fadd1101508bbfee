

def test_workers_and_threads_follow_the_cores_this_process_may_use(monkeypatch):
    from daca_bench.experiments import jobs

    monkeypatch.setattr(jobs.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert jobs.split_cores(8) == (1, 1)  # taskset -c 0 on a 2-core machine: one worker, one thread
    monkeypatch.setattr(jobs.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert jobs.split_cores(8, 2) == (2, 2) and jobs.split_cores(1) == (1, 4)
