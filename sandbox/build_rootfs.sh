#!/bin/bash
# Build the daca-bench sandbox image without any image registry: debootstrap a minimal
# Debian (minbase + python3 and its full standard library) from the machine's own apt
# mirror, strip it, add the unprivileged user 10001, and `docker import` it as TAG.
#
# usage (as root):  sandbox/build_rootfs.sh SUITE MIRROR TAG
#   MIRROR is the URI of the machine's apt source (see /etc/apt/sources.list.d/).
# Normally run through `python -m daca_bench sandbox build`, which reads SUITE and MIRROR
# from /etc/apt/sources.list{,.d/*} at run time and tags the image with a hash of this file.
# The worker program is not baked in: the client passes the sandbox/worker/ package at container start.
set -euo pipefail

if [ "$#" -ne 3 ]; then
    echo "usage: $0 SUITE MIRROR TAG" >&2
    exit 2
fi
suite=$1
mirror=$2
tag=$3

if [ "$(id -u)" -ne 0 ]; then
    echo "build_rootfs.sh: debootstrap needs root (run it as root, or build from sandbox/Dockerfile)" >&2
    exit 1
fi
for tool in debootstrap docker tar; do
    command -v "$tool" >/dev/null || { echo "build_rootfs.sh: $tool not found (scripts/setup_docker.sh installs it)" >&2; exit 1; }
done

work=$(mktemp -d /var/tmp/daca-sandbox-rootfs.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root

echo "build_rootfs.sh: debootstrap $suite from $mirror into $root" >&2
debootstrap --variant=minbase --include=python3,python3-distutils,python3-lib2to3 \
    "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 30 "$work/debootstrap.log" >&2
    echo "build_rootfs.sh: debootstrap failed (log above)" >&2
    exit 1
}

# The unprivileged user the worker and every program run as.
echo 'sandbox:x:10001:10001:daca-bench sandbox:/tmp:/usr/sbin/nologin' >>"$root/etc/passwd"
echo 'sandbox:x:10001:' >>"$root/etc/group"

# Strip what a sandbox never needs; keep the Python standard library whole.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
       "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
       "$root"/var/log/* "$root"/tmp/* "$root"/root/.cache
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'C.UTF-8' -exec rm -rf {} + 2>/dev/null || true
# No setuid/setgid binaries (no-new-privileges already neutralises them; this is belt and braces).
find "$root" -xdev -type f -perm /6000 -exec chmod ug-s {} +

# Sanity check: the interpreter and a few standard-library modules load in the rootfs.
chroot "$root" /usr/bin/python3 -I -c 'import json, marshal, select, resource, ctypes, sqlite3, decimal, asyncio, unittest, multiprocessing; print("python", __import__("sys").version.split()[0], "ok")' >&2

tar --numeric-owner -C "$root" -c . | docker import \
    --change 'USER 10001:10001' \
    --change 'WORKDIR /' \
    --change 'ENV LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1' \
    --change 'CMD ["/usr/bin/python3", "-I"]' \
    --message "daca-bench sandbox rootfs ($suite, debootstrap minbase + python3)" \
    - "$tag" >/dev/null
echo "build_rootfs.sh: imported $tag" >&2
