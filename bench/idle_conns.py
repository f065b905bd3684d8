#!/usr/bin/env python3
"""Opens COUNT keep-alive connections to an HTTP server, sends one request on
each (GET PATH with the bearer key in EQ_BENCH_KEY), reads its answer, then
leaves them idle and reads the server's VmRSS from /proc/PID/status.

    idle_conns.py HOST PORT PID[,PID...] COUNT PATH

Prints `IDLE conns=N ok=M rss_before_kib=A rss_kib=B` (summed over the PIDs,
for several eq-api processes on one port) and closes everything.
The caller raises `ulimit -n` first (this process needs COUNT descriptors).
"""
import asyncio
import os
import sys


def vmrss_kib(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


async def main():
    host, port, pid, count, path = sys.argv[1], int(sys.argv[2]), [int(p) for p in sys.argv[3].split(',')], int(sys.argv[4]), sys.argv[5]
    key = os.environ.get("EQ_BENCH_KEY", "")
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n\r\n").encode()
    before = vmrss_kib(pid)
    gate = asyncio.Semaphore(128)  # connects at once: keep the accept backlog sane
    writers = []
    ok = 0

    async def one():
        nonlocal ok
        async with gate:
            try:
                reader, writer = await asyncio.open_connection(host, port)
            except OSError:
                return
            writers.append(writer)
            try:
                writer.write(request)
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, asyncio.LimitOverrunError):
                return
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            try:
                await asyncio.wait_for(reader.readexactly(length), 30)
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
                return
            if head.startswith(b"HTTP/1.1 200"):
                ok += 1

    await asyncio.gather(*(one() for _ in range(count)))
    await asyncio.sleep(1.0)  # let the server settle (buffers freed, timers armed)
    open_now = sum(1 for w in writers if not w.is_closing())
    after = vmrss_kib(pid)
    print(f"IDLE conns={open_now} ok={ok} rss_before_kib={before} rss_kib={after}", flush=True)
    for w in writers:
        w.close()


asyncio.run(main())
