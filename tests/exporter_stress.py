#!/usr/bin/env python3
"""Exporter robustness drill against a running `plumb health --serve` on
127.0.0.1:PORT (loopback only). Prints "ok NAME" / "FAIL NAME: why" lines and
exits 1 on any failure. No timing is asserted (docs/HACKING.md): latencies
are printed, and only a hang fails, bounded by a generous HANG_S. Drills, run
together:
  - a client trickling its request two bytes a second (slowloris): the
    server must cut it before the request is complete (the whole trickle
    takes a minute; a server that never cuts answers it at the end);
  - 200 concurrent connections each sending GET /metrics: every one answered
    (200) or cut, none hanging;
  - malformed request lines: a 4xx or a cut, never a hang;
  - a 10 MB header: a 4xx (431/413/400) or a cut;
  - while all that runs, fresh GET /metrics answer 200, repeatedly.
Usage: exporter_stress.py PORT REQ_TIMEOUT"""
import socket
import sys
import threading
import time

PORT = int(sys.argv[1])
REQ_TIMEOUT = float(sys.argv[2])
HOST = "127.0.0.1"
HANG_S = 120.0  # an operation not done by then is hung: the failure
fails = []
lock = threading.Lock()


def report(ok, name, why=""):
    with lock:
        if ok:
            print("ok   " + name, flush=True)
        else:
            print("FAIL %s: %s" % (name, why), flush=True)
            fails.append(name)


def exchange(payload, timeout=HANG_S):
    """Sends payload, returns (status code or None, error or None)."""
    s = socket.create_connection((HOST, PORT), timeout=timeout)
    try:
        s.sendall(payload)
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        if not data:
            return None, "closed"
        parts = data.split(b"\r\n", 1)[0].split()
        return (int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None), None
    except (ConnectionResetError, BrokenPipeError) as e:
        return None, "cut: %s" % e
    finally:
        s.close()


def scrape():
    """GET /metrics: (whole response, seconds it took); raises on a hang."""
    t0 = time.monotonic()
    s = socket.create_connection((HOST, PORT), timeout=HANG_S)
    try:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data, time.monotonic() - t0
    finally:
        s.close()


def spread(xs):
    xs = sorted(xs)
    return "min %.3f s, median %.3f s, max %.3f s" % (xs[0], xs[len(xs) // 2], xs[-1]) if xs else "none"


# 1. slowloris: a complete request, two bytes a second
slow_result = {}
SLOW_REQ = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 80 + b"\r\n\r\n"


def slow_client():
    s = socket.create_connection((HOST, PORT), timeout=HANG_S)
    t0 = time.monotonic()
    sent, cut, answer = 0, False, b""
    try:
        for b in SLOW_REQ:
            s.sendall(bytes([b]))
            sent += 1
            s.settimeout(0.5)  # the pace of the trickle, not a bound on the server
            try:
                chunk = s.recv(4096)  # EOF, or an error response: the server ended the request
                if not chunk or sent < len(SLOW_REQ):
                    cut, answer = True, chunk
                    break
                answer = chunk
            except socket.timeout:
                pass
        if not cut and not answer:
            s.settimeout(HANG_S)
            answer = s.recv(4096)  # the server answers the whole trickle: it never cut it
    except (ConnectionResetError, BrokenPipeError, OSError):
        cut = True
    finally:
        s.close()
    slow_result.update(cut=cut, sent=sent, after=time.monotonic() - t0, answer=answer[:40])


slow = threading.Thread(target=slow_client)
slow.start()
time.sleep(0.5)

# 2. 200 concurrent connections
results, crowd_lat = [], []


def one_conn(i):
    t0 = time.monotonic()
    try:
        code, err = exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        with lock:
            results.append(code if code else err)
            crowd_lat.append(time.monotonic() - t0)
    except Exception as e:  # a timeout here is a hang: a failure
        with lock:
            results.append("error: %r" % e)


threads = [threading.Thread(target=one_conn, args=(i,)) for i in range(200)]
for t in threads:
    t.start()

# 3. scrapes while the crowd and the slow client are connected
scrape_ok, scrape_err, lat = 0, "", []
for i in range(5):
    try:
        d, dt = scrape()
        lat.append(dt)
        if d.startswith(b"HTTP/1.1 200") and b"plumb_health_alerts" in d:
            scrape_ok += 1
        else:
            scrape_err = d[:80]
    except Exception as e:
        scrape_err = repr(e)
    time.sleep(0.2)
report(scrape_ok == 5, "/metrics answers during the crowd and the slow client (%s)" % spread(lat), scrape_err)

for t in threads:
    t.join(HANG_S + 5)
n200 = sum(1 for r in results if r == 200)
hung = [r for r in results if isinstance(r, str) and r.startswith("error")]
report(len(results) == 200 and not hung,
       "200 concurrent connections answered or cut (%d answered 200; %s)" % (n200, spread(crowd_lat)),
       "%d results, %d hung: %s" % (len(results), len(hung), hung[:3]))
report(n200 >= 1, "concurrent connections get /metrics", "none answered 200")

# 4. malformed request lines
for name, payload in [
    ("garbage line", b"GARBAGE\r\n\r\n"),
    ("missing target", b"GET\r\n\r\n"),
    ("bad version", b"GET /metrics HTTP/9.9x\r\n\r\n"),
    ("binary junk", bytes(range(256)) + b"\r\n\r\n"),
    ("header without colon", b"GET /metrics HTTP/1.1\r\nHost x\r\nnocolon\r\n\r\n"),
]:
    try:
        code, err = exchange(payload)
        report(code is None or 400 <= code < 500, "malformed request (%s) gets 4xx or is cut (%s)" % (name, code or err),
               "status %s" % code)
    except Exception as e:
        report(False, "malformed request (%s)" % name, repr(e))
    try:
        d, dt = scrape()
        report(d.startswith(b"HTTP/1.1 200"), "/metrics after %s (%.3f s)" % (name, dt), d[:60])
    except Exception as e:
        report(False, "/metrics after %s" % name, repr(e))

# unknown path and method
code, err = exchange(b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
report(code == 404, "unknown path gets 404", str(code or err))
code, err = exchange(b"DELETE /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
report(code == 405, "DELETE gets 405", str(code or err))

# 5. a 10 MB header
big = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * (10 * 1024 * 1024) + b"\r\n\r\n"
try:
    code, err = exchange(big)
    report(code is None or 400 <= code < 500, "10 MB header gets 4xx or is cut (%s)" % (code or err), "status %s" % code)
except Exception as e:
    report(False, "10 MB header", repr(e))
try:
    d, dt = scrape()
    report(d.startswith(b"HTTP/1.1 200"), "/metrics after the 10 MB header (%.3f s)" % dt, d[:60])
except Exception as e:
    report(False, "/metrics after the 10 MB header", repr(e))

# the slow client: cut by the server before its request was complete
slow.join(len(SLOW_REQ) * 0.5 + HANG_S + 5)
r = slow_result
report(not slow.is_alive() and r.get("cut") is True and r.get("sent", 0) < len(SLOW_REQ),
       "slow client (2 bytes/s) cut after %d of %d bytes, %.1f s (request timeout %.0f s)" %
       (r.get("sent", -1), len(SLOW_REQ), r.get("after", -1), REQ_TIMEOUT),
       "never cut: %s" % r if r else "still sending (hung)")
try:
    d, dt = scrape()
    report(d.startswith(b"HTTP/1.1 200"), "/metrics at the end (%.3f s)" % dt, d[:60])
except Exception as e:
    report(False, "/metrics at the end", repr(e))
sys.exit(1 if fails else 0)
