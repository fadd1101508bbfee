#!/bin/bash
# Make this machine ready for the daca-bench code sandbox; safe to run again (idempotent).
#   1. apt-get install docker.io and debootstrap if missing (apt-get update only when needed)
#   2. start dockerd in the background if `docker info` fails, and wait until it answers
#   3. build the sandbox image (`python -m daca_bench sandbox build`; an image of the same
#      recipe hash is reused)
# Run as root, non-interactively:  sudo scripts/setup_docker.sh
# Env: PYTHON (default .venv/bin/python, else python3), DOCKERD_LOG (default /tmp/dockerd.log),
#      DOCKERD_WAIT seconds (default 60).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
cd "$(dirname "$0")/.."

say() { echo "setup_docker: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run me as root (apt-get, dockerd and debootstrap need it)"

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]}"
    if ! apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/setup_docker_apt.log 2>&1; then
        say "apt-get install failed; running apt-get update first"
        apt-get update >>/tmp/setup_docker_apt.log 2>&1 || die "apt-get update failed (see /tmp/setup_docker_apt.log)"
        apt-get install -y --no-install-recommends "${missing[@]}" >>/tmp/setup_docker_apt.log 2>&1 \
            || die "apt-get install ${missing[*]} failed (see /tmp/setup_docker_apt.log)"
    fi
else
    say "docker.io and debootstrap are installed"
fi

if docker info >/dev/null 2>&1; then
    say "the Docker engine answers"
else
    log=${DOCKERD_LOG:-/tmp/dockerd.log}
    if pgrep -x dockerd >/dev/null 2>&1; then
        say "dockerd is running but does not answer yet; waiting"
    else
        say "starting dockerd in the background (log: $log)"
        setsid dockerd >"$log" 2>&1 < /dev/null &
    fi
    wait_s=${DOCKERD_WAIT:-60}
    for _ in $(seq "$wait_s"); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    docker info >/dev/null 2>&1 || { tail -n 20 "$log" >&2 || true; die "dockerd did not answer within ${wait_s}s (log: $log)"; }
    say "the Docker engine answers"
fi

py=${PYTHON:-}
if [ -z "$py" ]; then
    if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi
fi
"$py" -c "import docker" 2>/dev/null || die "$py cannot import the docker package (pip install docker, or set PYTHON)"
"$py" -m daca_bench sandbox build
say "ready: try '$py -m daca_bench sandbox selftest'"
