"""The Python client against real daemons on a lab rack: run by the Go
test TestPythonClient (cluster/python_test.go), which starts a 3-host rack
and passes the sockets in the environment:

    EXO_SOCKETS      the hosts' API sockets, os.pathsep-separated (host i's
                     daemon has member id i)
    EXO_MAX_MESSAGE  the daemons' max_message_bytes
    EXO_LAT_N, EXO_RATE_M, EXO_WINDOW, EXO_SIZE
                     the measurement: N publishes one at a time, M with
                     WINDOW in flight, SIZE-byte messages

It prints one "ok: ..." line per check, "measure <client> p50_us=..
msgs_per_s=.." lines, and asks the Go test for its part with a line
"WAIT <what>", reading one line from stdin once it is done: "WAIT
go-measure" (the Go client measured the same way), "WAIT kill 2" (host 2's
daemon killed). It ends with "PASS"; any failure is a traceback and exit
status 1.
"""

import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import exo_client  # noqa: E402
from exo_client import aio  # noqa: E402

SOCKS = os.environ["EXO_SOCKETS"].split(os.pathsep)
MAX_MESSAGE = int(os.environ["EXO_MAX_MESSAGE"])
LAT_N = int(os.environ.get("EXO_LAT_N", "2000"))
RATE_M = int(os.environ.get("EXO_RATE_M", "20000"))
WINDOW = int(os.environ.get("EXO_WINDOW", "128"))
SIZE = int(os.environ.get("EXO_SIZE", "64"))
T = 30  # seconds: no answer within this fails the check


def ok(what):
    print("ok: " + what, flush=True)


def wait_for(what):
    print("WAIT " + what, flush=True)
    line = sys.stdin.readline()
    if line.strip() != "done":
        raise SystemExit("the Go test answered %r to WAIT %s" % (line, what))


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def publishes():
    """Blocking and pipelined publishes from hosts A and B (and asyncio's
    from A); returns {payload: (position, sender)}."""
    sent = {}
    with exo_client.connect(SOCKS[0], timeout=T) as a, exo_client.connect(SOCKS[1], timeout=T) as b:
        check(a.hello.version == 1 and "publish-batch" in a.hello.features, "hello %r" % (a.hello,))
        ok("connect: Hello answered, daemon API version %d, features %s" % (a.hello.version, ",".join(a.hello.features)))
        prev = None
        for i in range(50):
            payload = b"A-blocking-%d" % i
            pos = again("blocking publish", lambda: a.publish(payload, timeout=T))
            check(prev is None or pos > prev, "blocking publishes on one connection: %r after %r" % (pos, prev))
            prev = pos
            sent[payload] = (pos, 0)
        ok("50 blocking publishes at A: agreed at increasing positions, the last %s" % (prev,))
        futs = {b"B-async-%d" % i: b.publish_async(b"B-async-%d" % i) for i in range(200)}
        for payload, f in futs.items():
            try:
                sent[payload] = (f.result(T), 1)
            except exo_client.DroppedError as e:
                dropped("publish_async", e)  # not agreed: never delivered
                sent[payload] = (again("publish_async", lambda: b.publish(payload, timeout=T)), 1)
        # publish_many raises the first drop and no positions: the
        # messages of a run that failed are left out of the check (they
        # may be delivered, under names of their own).
        run = [0]

        def many():
            run[0] += 1
            payloads = [b"B-many-%d-%d" % (run[0], i) for i in range(300)]
            return zip(payloads, b.publish_many(payloads, window=32, timeout=T))
        for payload, pos in again("publish_many", many):
            sent[payload] = (pos, 1)
        batch = [b"B-batch-%d" % i for i in range(100)]
        try:
            got = b.publish_batch(batch, timeout=T)
            check(got == sorted(got), "a batch's positions increase")
        except exo_client.BatchError as e:
            check(all(isinstance(r, (exo_client.Position, exo_client.DroppedError)) for r in e.results), "batch error %s" % e)
            check(sorted(r for r in e.results if isinstance(r, exo_client.Position)) ==
                  [r for r in e.results if isinstance(r, exo_client.Position)], "a batch's positions increase")
            dropped("publish_batch", e)
            got = [r if isinstance(r, exo_client.Position) else again("publish_batch", lambda: b.publish(x, timeout=T))
                   for x, r in zip(batch, e.results)]
        for payload, pos in zip(batch, got):
            sent[payload] = (pos, 1)
        ok("pipelined at B: 200 publish_async, 300 publish_many (window 32), a batch of 100 (increasing positions)")

    async def from_async():
        async with await aio.connect(SOCKS[0], timeout=T) as c:
            payloads = [b"A-asyncio-%d" % i for i in range(200)]
            got = await asyncio.wait_for(asyncio.gather(*(c.publish(x) for x in payloads), return_exceptions=True), T)
            out = {}
            for x, r in zip(payloads, got):
                if isinstance(r, exo_client.DroppedError):
                    dropped("asyncio publish", r)  # not agreed: never delivered
                    r = await again_async("asyncio publish", lambda: c.publish(x))
                elif isinstance(r, BaseException):
                    raise r
                out[x] = r
            return out

    for payload, pos in asyncio.run(from_async()).items():
        sent[payload] = (pos, 0)
    ok("asyncio at A: 200 publishes in flight together (gather)")
    positions = [pos for pos, _ in sent.values()]
    check(len(set(positions)) == len(positions), "two messages at one position")
    ok("%d messages from A and B, at %d distinct positions" % (len(sent), len(positions)))
    return sent


def follow(sent):
    """Subscriptions from the middle of the stream at C (blocking) and A
    (asyncio): every message published from there on at the position its
    publish returned, nothing before it, the same stream at both."""
    ordered = sorted(pos for pos, _ in sent.values())
    mid = ordered[len(ordered) // 2].seq
    want = {p: v for p, v in sent.items() if v[0].seq >= mid}
    before = {p for p, v in sent.items() if v[0].seq < mid}

    def check_stream(msgs, where):
        seen = 0
        prev = None
        for m in msgs:
            check(m.seq >= mid, "%s: seq %d below the start %d" % (where, m.seq, mid))
            check(prev is None or m.position > prev, "%s: %s after %s" % (where, m.position, prev))
            prev = m.position
            check(m.payload not in before, "%s: %r, published below the start, delivered" % (where, m.payload))
            if m.payload in want:
                pos, sender = want[m.payload]
                check(m.position == pos and m.sender == sender,
                      "%s: %r at %s from %d, its publish said %s from %d" % (where, m.payload, m.position, m.sender, pos, sender))
                seen += 1
        check(seen == len(want), "%s: %d of the %d messages published from seq %d" % (where, seen, len(want), mid))

    stream = []
    with exo_client.subscribe(SOCKS[2], mid, timeout=T) as sub:
        for m in sub:
            stream.append(m)
            if m.position == ordered[-1]:
                break
    check_stream(stream, "C's subscription")
    ok("subscription at C from seq %d (the middle): %d messages, the %d published from there at their positions and senders"
       % (mid, len(stream), len(want)))

    async def from_async():
        out = []
        sub = await aio.subscribe(SOCKS[0], mid, timeout=T)
        async with sub:
            async for m in sub:
                out.append(m)
                if m.position == ordered[-1]:
                    break
        return out

    astream = asyncio.run(from_async())
    check_stream(astream, "A's asyncio subscription")
    check(astream == stream, "A's stream and C's differ")
    ok("asyncio subscription at A from seq %d: the same %d messages as C's" % (mid, len(astream)))


def status(sent):
    last = max(pos for pos, _ in sent.values())
    for i, sock in enumerate(SOCKS):
        with exo_client.connect(sock, timeout=T) as c:
            st = c.status(timeout=T)
        check(st["id"] == i, "host %d's status says id %r" % (i, st["id"]))
        check(st["agreement_pointer"] >= last.seq, "host %d agreed %d, below %d" % (i, st["agreement_pointer"], last.seq))
    ok("status at A, B, C: ids 0..2, each agreed past seq %d" % last.seq)


def errors():
    with exo_client.connect(SOCKS[0], timeout=T) as a:
        try:
            a.publish(bytes(MAX_MESSAGE + 1), timeout=T)
            raise AssertionError("a message of max_message_bytes+1 was agreed")
        except exo_client.TooLargeError as e:
            check(e.code == 2, "code %d" % e.code)
            ok("publish of %d bytes (max_message_bytes %d): TooLargeError: %s" % (MAX_MESSAGE + 1, MAX_MESSAGE, e))
        check(again("max_message_bytes", lambda: a.publish(bytes(MAX_MESSAGE), timeout=T)).seq > 0,
              "a message of max_message_bytes")
        ok("publish of exactly max_message_bytes agreed, on the same connection")
        def one_too_large():
            try:
                a.publish_batch([b"small-1", bytes(MAX_MESSAGE + 1), b"small-2"], timeout=T)
            except exo_client.BatchError as e:
                for r in e.results:
                    if isinstance(r, exo_client.DroppedError):
                        raise r  # a reconciliation dropped a small one: the batch again
                return e
            raise AssertionError("a batch with a too large message all agreed")
        e = again("a batch with a too large message", one_too_large)
        check(e.failed == 1 and e.index == 1 and isinstance(e.error, exo_client.TooLargeError),
              "batch error %s" % e)
        check(isinstance(e.results[0], exo_client.Position) and e.results[0] < e.results[2], "results %r" % e.results)
        ok("batch with one too large message: it alone failed (%s), the others agreed" % e.error)
    bad = os.path.join(os.path.dirname(SOCKS[0]), "no-such-daemon.sock")
    try:
        exo_client.connect(bad, timeout=T)
        raise AssertionError("connected to " + bad)
    except exo_client.ExoConnectionError as e:
        check("is the daemon running?" in str(e), str(e))
        ok("bad socket path: ExoConnectionError: %s" % e)


# A publish that a reconciliation drops (a false takeover on a busy
# machine drops what was not yet agreed: DroppedError, "publish again") is
# published again, as the error asks; a measurement it interrupts runs
# again. One reconciliation drops every message of the entries it cuts
# (an entry carries several), so the bound counts reconciliations (the
# error names the entry): at most MAX_DROPS a check, and MAX_DROPPED
# messages in all.
MAX_DROPS = 10
MAX_DROPPED = 10000
drops = [0]
seen_drops = set()


def dropped(what, e):
    drops[0] += 1
    new = str(e) not in seen_drops
    seen_drops.add(str(e))
    check(len(seen_drops) <= MAX_DROPS and drops[0] <= MAX_DROPPED,
          "%s: more than %d reconciliations (or %d messages) dropped publishes: %s" % (what, MAX_DROPS, MAX_DROPPED, e))
    if new:
        print("note: %s: dropped by a reconciliation, published again (%d reconciliations so far): %s"
              % (what, len(seen_drops), e), flush=True)


def again(what, run):
    while True:
        try:
            return run()
        except exo_client.DroppedError as e:
            dropped(what, e)


async def again_async(what, run):
    while True:
        try:
            return await run()
        except exo_client.DroppedError as e:
            dropped(what, e)


def latency_rate():
    """The figures: p50 of blocking publishes one at a time, and msgs/s
    with WINDOW in flight, for the blocking and the asyncio client."""
    payload = b"x" * SIZE

    def p50(lat):
        return sorted(lat)[len(lat) // 2] / 1e3

    with exo_client.connect(SOCKS[0], timeout=T) as c:
        again("warm-up", lambda: c.publish_many([payload] * 500, window=WINDOW, timeout=T))
        lat = []
        for _ in range(LAT_N):
            def one():
                t0 = time.perf_counter_ns()
                c.publish(payload, timeout=T)
                return time.perf_counter_ns() - t0
            lat.append(again("latency", one))

        def rated():
            t0 = time.perf_counter()
            c.publish_many([payload] * RATE_M, window=WINDOW, timeout=T)
            return RATE_M / (time.perf_counter() - t0)
        rate = again("rate", rated)
    print("measure python p50_us=%.0f msgs_per_s=%.0f" % (p50(lat), rate), flush=True)

    async def run():
        async with await aio.connect(SOCKS[0], timeout=T) as c:
            await again_async("asyncio warm-up", lambda: c.publish_many([payload] * 500, window=WINDOW))
            lat = []
            for _ in range(LAT_N):
                async def one():
                    t0 = time.perf_counter_ns()
                    await c.publish(payload)
                    return time.perf_counter_ns() - t0
                lat.append(await again_async("asyncio latency", one))

            async def rated():
                t0 = time.perf_counter()
                await c.publish_many([payload] * RATE_M, window=WINDOW)
                return RATE_M / (time.perf_counter() - t0)
            return lat, await again_async("asyncio rate", rated)

    lat, rate = asyncio.run(asyncio.wait_for(run(), 10 * T))
    print("measure python-asyncio p50_us=%.0f msgs_per_s=%.0f" % (p50(lat), rate), flush=True)
    wait_for("go-measure")


def compacted():
    try:
        with exo_client.subscribe(SOCKS[1], 0, timeout=T) as sub:
            m = next(sub)
        raise AssertionError("a subscription from seq 0 got %r: the history should have moved on" % (m,))
    except exo_client.CompactedError as e:
        check(e.code == 6 and "oldest" in e.text, str(e))
        ok("subscription from seq 0 after the load (keep_entries small): CompactedError: %s" % e)


def daemon_gone():
    c = exo_client.connect(SOCKS[2], timeout=T)
    st = c.status(timeout=T)
    sub = exo_client.subscribe(SOCKS[2], st["agreement_pointer"] + 1, timeout=T)
    wait_for("kill 2")
    try:
        c.publish(b"to a dead daemon", timeout=T)
        raise AssertionError("a publish at a killed daemon was agreed")
    except exo_client.ExoConnectionError as e:
        ok("publish at C after its daemon was killed: ExoConnectionError: %s" % e)
    try:
        for _ in sub:  # what was agreed before the kill, then the end
            pass
        raise AssertionError("the subscription at a killed daemon ended without an error")
    except exo_client.ExoConnectionError as e:
        ok("subscription at C after its daemon was killed: ExoConnectionError: %s" % e)
    sub.close()
    c.close()
    try:
        exo_client.connect(SOCKS[2], timeout=T)
        raise AssertionError("connected to a killed daemon")
    except exo_client.ExoConnectionError as e:
        ok("connect to C's socket after the kill: ExoConnectionError: %s" % e)
    with exo_client.connect(SOCKS[0], timeout=T) as a:
        pos = again("after the kill", lambda: a.publish(b"after the kill", timeout=60))
    ok("A and B go on without C: a publish at A agreed at %s" % (pos,))


def main():
    sent = publishes()
    follow(sent)
    status(sent)
    errors()
    latency_rate()
    compacted()
    daemon_gone()
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
