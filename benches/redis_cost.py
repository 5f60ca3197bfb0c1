#!/usr/bin/env python3
"""Redis CPU per lock + unlock pair, by what the scripts do: why W2 is bound by Redis.

Starts its own redis-server on a free loopback port, then for each variant sends 32 pairs
at a time (32 acquires pipelined, then 32 releases), ROUNDS times (default 1,500), and
prints redis-server's CPU (`INFO cpu`, user + system) per pair. Run:

    python3 benches/redis_cost.py            # every variant
    python3 benches/redis_cost.py real rslock

Variants:
- rslock:      SET NX PX, then the compare-and-delete script (what rslock sends).
- real:        lua/acquire.lua and unlock.lua, one item per call.
- batched:     the same scripts, all 32 items in one call each (the library's batching
               at its best).
- bare:        the same six commands with no checks (EXISTS, HINCRBY, PEXPIRE; HGET,
               PUBLISH, DEL), one call each.
"""
import os
import socket
import subprocess
import sys
import time

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lua")
TASKS = 32
ROUNDS = int(os.environ.get("ROUNDS", "1500"))
OWNER = "00000000-0000-4000-8000-000000000000:"


def source(name):
    with open(os.path.join(SCRIPTS, name)) as f:
        return f.read()


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    def reply(self):
        line = self.file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind in (b"+", b":"):
            return rest
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise RuntimeError("unexpected reply %r" % line)

    def send(self, calls):
        self.sock.sendall(b"".join(encode(*c) for c in calls))
        return [self.reply() for _ in calls]

    def cpu(self):
        info = self.send([("INFO", "cpu")])[0].decode()
        return sum(float(l.split(":")[1]) for l in info.split("\r\n")
                   if l.startswith(("used_cpu_user:", "used_cpu_sys:")))

    def load(self, text):
        return self.send([("SCRIPT", "LOAD", text)])[0].decode()


ACQUIRE = source("lock_common.lua") + source("acquire.lua")
UNLOCK = source("unlock.lua")
BARE_ACQUIRE = ("redis.call('exists', KEYS[1]); redis.call('hincrby', KEYS[1], ARGV[2], 1); "
                "redis.call('pexpire', KEYS[1], ARGV[1]); return -3")
BARE_UNLOCK = ("redis.call('hget', KEYS[1], ARGV[5]); redis.call('publish', ARGV[3], '0'); "
               "redis.call('del', KEYS[1]); return 1")


def scripted(conn, acquire, unlock, per_call):
    """Rounds of TASKS pairs: the acquires, then the releases, `per_call` items a call."""
    sa, su = conn.load(acquire), conn.load(unlock)
    for _ in range(ROUNDS):
        items = range(TASKS)
        if per_call == 1:
            acquires = [("EVALSHA", sa, 1, "w2:%d" % i, 30000, OWNER + str(i), 1) for i in items]
        else:
            args = [a for i in items for a in (30000, OWNER + str(i))]
            acquires = [("EVALSHA", sa, TASKS, *["w2:%d" % i for i in items], *args)]
        got = conn.send(acquires)
        assert all(r == b"-3" for r in (got if per_call == 1 else got[0])), got[:2]
        # Per release: the lock; its channel, no lease to re-apply, the owner, a first
        # try, one hold expected.
        releases = [("w2:%d" % i, ("redisson_lock__channel:{w2:%d}" % i, 0, OWNER + str(i), 0, 1))
                    for i in items]
        if per_call == 1:
            calls = [("EVALSHA", su, 1, k, 0, "publish", *a, 1) for k, a in releases]
        else:
            calls = [("EVALSHA", su, TASKS, *[k for k, _ in releases], 0, "publish",
                      *[x for _, a in releases for x in a])]
        got = conn.send(calls)
        assert all(r == b"1" for r in (got if per_call == 1 else got[0])), got[:2]


def set_nx(conn):
    delete = conn.load("if redis.call('get', KEYS[1]) == ARGV[1] then "
                       "return redis.call('del', KEYS[1]) else return 0 end")
    for r in range(ROUNDS):
        got = conn.send([("SET", "w2:s:%d" % i, "t%d" % r, "NX", "PX", 30000) for i in range(TASKS)])
        assert all(g == b"OK" for g in got), got[:2]
        got = conn.send([("EVALSHA", delete, 1, "w2:s:%d" % i, "t%d" % r) for i in range(TASKS)])
        assert all(g == b"1" for g in got), got[:2]


VARIANTS = {
    "rslock": set_nx,
    "real": lambda c: scripted(c, ACQUIRE, UNLOCK, 1),
    "batched": lambda c: scripted(c, ACQUIRE, UNLOCK, TASKS),
    "bare": lambda c: scripted(c, BARE_ACQUIRE, BARE_UNLOCK, 1),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    wanted = sys.argv[1:] or list(VARIANTS)
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                conn = Conn(port)
                break
            except OSError:
                time.sleep(0.05)
        print("variant          redis CPU µs per pair  (%d pairs)" % (TASKS * ROUNDS))
        for name in wanted:
            before = conn.cpu()
            VARIANTS[name](conn)
            print("%-16s %8.2f" % (name, (conn.cpu() - before) * 1e6 / (TASKS * ROUNDS)))
            conn.send([("FLUSHALL",)])
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
