#!/usr/bin/env python3
"""Exporter robustness drill against a running `plumb health --serve` on
127.0.0.1:PORT (loopback only). Prints "ok NAME" / "FAIL NAME: why" lines and
exits 1 on any failure. Drills, run together:
  - a client trickling one byte a second (slowloris): must be cut by the
    server within REQ_TIMEOUT + 4 s;
  - 200 concurrent connections each sending GET /metrics: every one answered
    (200) or cut, none left hanging past 10 s;
  - malformed request lines: a 4xx or a cut, never a hang;
  - a 10 MB header: a 4xx (431/413/400) or a cut;
  - while all that runs, a fresh GET /metrics answers within 1 s, repeatedly.
Usage: exporter_stress.py PORT REQ_TIMEOUT"""
import socket
import sys
import threading
import time

PORT = int(sys.argv[1])
REQ_TIMEOUT = float(sys.argv[2])
HOST = "127.0.0.1"
fails = []
lock = threading.Lock()


def report(ok, name, why=""):
    with lock:
        if ok:
            print("ok   " + name, flush=True)
        else:
            print("FAIL %s: %s" % (name, why), flush=True)
            fails.append(name)


def exchange(payload, timeout):
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


def scrape(timeout=1.0):
    """GET /metrics with a 1 s bound on connect+send+full response."""
    t0 = time.monotonic()
    s = socket.create_connection((HOST, PORT), timeout=timeout)
    try:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            left = timeout - (time.monotonic() - t0)
            if left <= 0:
                raise socket.timeout("over 1 s")
            s.settimeout(left)
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data
    finally:
        s.close()


# 1. slowloris: one byte a second
slow_result = {}


def slow_client():
    req = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
    s = socket.create_connection((HOST, PORT), timeout=2)
    t0 = time.monotonic()
    cut = False
    try:
        for b in req:
            s.sendall(bytes([b]))
            # a cut shows as EOF / reset on a non-blocking peek
            s.settimeout(1.0)
            try:
                s.recv(4096)  # EOF or an error response: either ends the request
                cut = True
                break
            except socket.timeout:
                pass
            if time.monotonic() - t0 > REQ_TIMEOUT + 20:
                break
    except (ConnectionResetError, BrokenPipeError, OSError):
        cut = True
    finally:
        s.close()
    slow_result["cut"] = cut
    slow_result["after"] = time.monotonic() - t0


slow = threading.Thread(target=slow_client)
slow.start()
time.sleep(0.5)

# 2. 200 concurrent connections
results = []


def one_conn(i):
    try:
        code, err = exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 10)
        results.append(code if code else err)
    except Exception as e:  # timeout = hang: a failure
        results.append("error: %r" % e)


threads = [threading.Thread(target=one_conn, args=(i,)) for i in range(200)]
for t in threads:
    t.start()

# 3. scrapes within 1 s while the crowd and the slow client are connected
scrape_ok = 0
scrape_err = ""
for i in range(5):
    try:
        d = scrape(1.0)
        if d.startswith(b"HTTP/1.1 200") and b"plumb_health_alerts" in d:
            scrape_ok += 1
        else:
            scrape_err = d[:80]
    except Exception as e:
        scrape_err = repr(e)
    time.sleep(0.2)
report(scrape_ok == 5, "/metrics answers within 1 s during the crowd and the slow client", scrape_err)

for t in threads:
    t.join(15)
n200 = sum(1 for r in results if r == 200)
hung = [r for r in results if isinstance(r, str) and r.startswith("error")]
report(len(results) == 200 and not hung, "200 concurrent connections answered or cut (%d answered 200)" % n200,
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
        code, err = exchange(payload, 5)
        report(code is None or 400 <= code < 500, "malformed request (%s) gets 4xx or is cut (%s)" % (name, code or err),
               "status %s" % code)
    except Exception as e:
        report(False, "malformed request (%s)" % name, repr(e))
    try:
        d = scrape(1.0)
        report(d.startswith(b"HTTP/1.1 200"), "/metrics within 1 s after %s" % name, d[:60])
    except Exception as e:
        report(False, "/metrics within 1 s after %s" % name, repr(e))

# unknown path and method
code, err = exchange(b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5)
report(code == 404, "unknown path gets 404", str(code or err))
code, err = exchange(b"DELETE /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5)
report(code == 405, "DELETE gets 405", str(code or err))

# 5. a 10 MB header
big = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * (10 * 1024 * 1024) + b"\r\n\r\n"
try:
    code, err = exchange(big, 10)
    report(code is None or 400 <= code < 500, "10 MB header gets 4xx or is cut (%s)" % (code or err), "status %s" % code)
except Exception as e:
    report(False, "10 MB header", repr(e))
try:
    d = scrape(1.0)
    report(d.startswith(b"HTTP/1.1 200"), "/metrics within 1 s after the 10 MB header", d[:60])
except Exception as e:
    report(False, "/metrics within 1 s after the 10 MB header", repr(e))

# the slow client: cut by the server, bounded in time
slow.join(REQ_TIMEOUT + 25)
report(slow_result.get("cut") is True and slow_result["after"] <= REQ_TIMEOUT + 4,
       "slow client (1 byte/s) cut after %.1f s (request timeout %.0f s)" % (slow_result.get("after", -1), REQ_TIMEOUT),
       str(slow_result))
try:
    d = scrape(1.0)
    report(d.startswith(b"HTTP/1.1 200"), "/metrics within 1 s at the end", d[:60])
except Exception as e:
    report(False, "/metrics within 1 s at the end", repr(e))
sys.exit(1 if fails else 0)
