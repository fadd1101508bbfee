"""The worker's entry point: preload the common modules, start W (which forks Z and B before
any key exists), read the client's HMAC key, announce "ready", then answer authenticated
requests one job at a time until the client hangs up or a job asks for a fresh worker.
"""

import base64
import hashlib
import hmac
import importlib
import json
import os
import select
import struct
import sys
import traceback

from .jobs import Worker
from .plumbing import send_frame

PRELOAD = (
    "math",
    "re",
    "collections",
    "itertools",
    "functools",
    "heapq",
    "bisect",
    "string",
    "random",
    "typing",
    "hashlib",
    "fractions",
    "decimal",
    "statistics",
    "copy",
    "operator",
    "json",
)


class LineReader:
    def __init__(self, fd):
        self.fd, self.buf = fd, bytearray()

    def line(self):
        while (i := self.buf.find(b"\n")) < 0:
            data = os.read(self.fd, 1 << 20)
            if not data:
                return None
            self.buf += data
        out = bytes(self.buf[:i])
        del self.buf[: i + 1]
        return out


class Channel:
    """The control stream, authenticated both ways with a key that arrives before any program
    exists (programs can reach the container's stdio pipes through /proc/1/fd of docker-init)."""

    def __init__(self, lines):
        self.lines, self.key, self.seq = lines, base64.b64decode(lines.line() or b""), 0

    def mac(self, kind, *parts):
        head = struct.pack(">cQ", kind, self.seq) + b"".join(struct.pack(">Q", len(p)) for p in parts)
        return hmac.new(self.key, head + b"".join(parts), hashlib.sha256).digest()

    def receive(self):
        parts = [self.lines.line() for _ in range(4)]
        if None in parts:
            return None
        h, code, test, tag = (base64.b64decode(p) for p in parts)
        self.seq += 1
        if not hmac.compare_digest(tag, self.mac(b"Q", h, code, test)):
            raise PermissionError("a request without the client's key: someone wrote into the control stream")
        return json.loads(h), code, test

    def reply(self, obj):
        payload = json.dumps(obj).encode()
        send_frame(1, payload + self.mac(b"R", payload))

    def tampered(self):
        """Any byte on stdin while a job ran came from a program, never from the client."""
        return bool(self.lines.buf) or bool(select.select([0], [], [], 0)[0])


def main():
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))  # --mode M --scratch DIR --mem-mb N --fsize-mb N [--drop-uid N]
    mode, scratch = args.get("--mode", "container"), args.get("--scratch", "/tmp")
    drop = int(args["--drop-uid"]) if "--drop-uid" in args else None
    for name in PRELOAD:
        importlib.import_module(name)
    w = Worker(
        mode, scratch, drop, int(args.get("--mem-mb", 512)), int(args.get("--fsize-mb", 16))
    )  # Z and B exist before the key is read: neither ever holds it
    chan = Channel(LineReader(0))
    isolated = mode == "container" or os.getpid() == 1  # an own PID namespace: nothing else to hit
    chan.reply(
        dict(
            ready=True,
            baseline=len(w.alive()),
            pid=w.me,
            python=sys.version.split()[0],
            mode=mode,
            isolated=isolated,
            traces_init=getattr(w, "traces_init", False),
        )
    )
    while True:
        try:
            job = chan.receive()
        except (PermissionError, ValueError) as e:
            chan.reply(
                dict(
                    status="sandbox_error",
                    returncode=None,
                    seconds=0.0,
                    stdout="",
                    output_bytes=0,
                    stderr=f"sandbox worker: {e}",
                    procs=-1,
                    clean=False,
                    restart=True,
                )
            )
            break
        if job is None:
            break
        h, code, test = job
        try:
            reply = w.run_job(h, code, test)
        except Exception:  # the harness itself broke: say so, never a score
            reply = dict(
                status="sandbox_error",
                returncode=None,
                seconds=0.0,
                stdout="",
                output_bytes=0,
                stderr="sandbox worker error:\n" + traceback.format_exc(),
                procs=-1,
                clean=False,
                restart=True,
            )
        if chan.tampered():
            reply.update(
                status="failed",
                returncode=None,
                restart=True,
                stderr=reply["stderr"] + "\nsandbox: the program wrote into the worker's control stream; "
                "counted as failed",
            )
        chan.reply(dict(reply, id=h.get("id")))
        if reply["restart"]:
            break
    os._exit(0)
