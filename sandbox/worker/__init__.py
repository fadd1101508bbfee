"""Sandbox worker: runs untrusted programs one at a time, each in a freshly forked process.

Runs inside every pool container (under docker-init, as user 10001) or, for the explicitly
chosen local-unsafe backend, as a host subprocess.  The client ships this whole package at
start: daca_bench/containers/payload.py packs every module of sandbox/worker/ into one
`python3 -I -B -c` program that imports them from memory (nothing is written to disk, nothing
is baked into the image) and calls main.main().
Control stream: the client's first stdin line is an HMAC key; each request is four base64
lines (JSON header, code, test, HMAC), so the stream never holds Docker's detach-key sequence;
each reply is a frame (4-byte length, JSON, HMAC), the first one "ready".  Programs can reach
these pipes through docker-init's /proc/1/fd, hence the key.

Processes, so that a pass is proven and not claimed (sandbox/README.md lists the routes):
  W  jobs.py: enforces the wall clock and the output cap, kills every other process after
     each job, wipes /tmp, reports.  Non-dumpable (/proc/W/{mem,fd} are closed), and the
     ptrace tracer of docker-init, so that no program can trace that one.
  Z  program.py: the zygote, forked before any job data exists; it only forks A, so no
     program's memory holds another job's code, test or output.
  A  program.py: the program, forked from Z per job: runs `code`, then serves calls to its
     functions; values leave A only as tagged JSON (values.py), so only plain builtin values
     reach the test.
  B  runner.py: the test runner, forked from W (non-dumpable, long-lived): runs the trusted
     `test` with proxies for A's functions and, only when the test code returned, sends W
     "PASS" + the job's nonce over a socket no program process holds.
The rest: main.py (entry point, the authenticated channel), plumbing.py (frames, descriptors,
confinement).

Try it: python -m daca_bench sandbox selftest   (DACA_BENCH_SANDBOX=local-unsafe: no Docker)
"""
