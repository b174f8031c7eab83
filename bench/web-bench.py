#!/usr/bin/env python3
"""The web view against IMAP on the same server, in the same run (issue 21's benchmarks).

Usage: web-bench.py WEB_ADDR IMAP_ADDR USER PASSWORD SERVER_PID [RUNS] [SESSIONS]

1. Server time of a list page (50 messages) at the newest and at the oldest end of the folder,
   and of opening a message, against IMAP `UID FETCH` of the same 50 messages' ENVELOPE and
   BODY.PEEK[] on a logged-in, selected connection: medians of RUNS, each request timed from
   its first byte sent to its last byte received on loopback (the client's own parsing kept
   out: urllib reads the whole body, imaplib the whole response).
2. SESSIONS logged-in browsers following /events: the server's resident memory per session,
   and the time from a message's SMTP 250 to the last of them hearing `changed`.
3. Memory per session, by a ramp: RAMP_STEPS more logged-in browsers following /events, added
   RAMP_STEP at a time (each a login, a session and an open stream), the resident memory after
   each step; the least-squares slope is the cost of one more session (200 alone is within
   the resident set's noise).
Prints RESULT lines.
"""
import http.client
import imaplib
import smtplib
import statistics
import sys
import threading
import time
import urllib.parse

web, imap_addr, user, password, pid = sys.argv[1:6]
runs = int(sys.argv[6]) if len(sys.argv) > 6 else 20
sessions = int(sys.argv[7]) if len(sys.argv) > 7 else 200
web_host, web_port = web.rsplit(":", 1)
imap_host, imap_port = imap_addr.rsplit(":", 1)


def rss_kib():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def login():
    c = http.client.HTTPConnection(web_host, int(web_port), timeout=60)
    body = urllib.parse.urlencode({"username": user, "password": password})
    c.request("POST", "/login", body, {"Content-Type": "application/x-www-form-urlencoded"})
    r = c.getresponse()
    r.read()
    cookie = r.getheader("Set-Cookie").split(";")[0]
    assert r.status == 303, r.status
    return c, cookie


def timed_get(c, cookie, path):
    t0 = time.perf_counter()
    c.request("GET", path, headers={"Cookie": cookie})
    r = c.getresponse()
    data = r.read()
    dt = time.perf_counter() - t0
    assert r.status == 200, (path, r.status, data[:200])
    return dt, data


def median_ms(xs):
    return f"{statistics.median(xs) * 1e3:.3f}", f"{min(xs) * 1e3:.3f}-{max(xs) * 1e3:.3f}"


c, cookie = login()
imap = imaplib.IMAP4(imap_host, int(imap_port))
imap.login(user, password)
_, data = imap.select("INBOX", readonly=True)
_, found = imap.uid("SEARCH", None, "ALL")
uids = [int(u) for u in found[0].split()]
total = len(uids)
newest, oldest = uids[-50:], uids[:50]

# Warm both paths once (page cache, caches), then alternate.
results = {"list_first": [], "list_last": [], "open": [], "imap_first": [], "imap_last": []}
for warm in range(2):
    timed_get(c, cookie, "/mail")
    imap.uid("FETCH", f"{newest[0]}:{newest[-1]}", "(ENVELOPE BODY.PEEK[])")
# Open once so it is read (opening an unread message also writes its \Seen).
timed_get(c, cookie, f"/message?folder=INBOX&uid={newest[-1]}")
for _ in range(runs):
    results["list_first"].append(timed_get(c, cookie, "/mail")[0])
    results["list_last"].append(timed_get(c, cookie, f"/mail?folder=INBOX&before={oldest[-1] + 1}")[0])
    results["open"].append(timed_get(c, cookie, f"/message?folder=INBOX&uid={newest[-1]}")[0])
    for key, batch in (("imap_first", newest), ("imap_last", oldest)):
        t0 = time.perf_counter()
        typ, _ = imap.uid("FETCH", f"{batch[0]}:{batch[-1]}", "(ENVELOPE BODY.PEEK[])")
        results[key].append(time.perf_counter() - t0)
        assert typ == "OK"
med = {k: statistics.median(v) for k, v in results.items()}
for k, v in results.items():
    m, r = median_ms(v)
    print(f"RESULT web_time what={k} messages_in_folder={total} runs={runs} median_ms={m} range_ms={r}")
print(f"RESULT web_ratio first_page_over_imap={med['list_first'] / med['imap_first']:.3f} "
      f"last_page_over_imap={med['list_last'] / med['imap_last']:.3f} target=<=2 "
      f"met={med['list_first'] <= 2 * med['imap_first'] and med['list_last'] <= 2 * med['imap_last']}")
imap.logout()

# 2. Live updates to many sessions.
before = rss_kib()
streams = []
for i in range(sessions):
    conn, ck = login()
    conn.request("GET", "/events", headers={"Cookie": ck})
    r = conn.getresponse()
    assert r.status == 200
    streams.append((conn, r))
time.sleep(1.0)
after = rss_kib()
heard = []
lock = threading.Lock()


def listen(r):
    while True:
        line = r.fp.readline()
        if not line:
            return
        if line.startswith(b"event: changed"):
            with lock:
                heard.append(time.perf_counter())
            return


threads = [threading.Thread(target=listen, args=(r,), daemon=True) for _, r in streams]
for t in threads:
    t.start()
smtp_host, smtp_port = sys.argv[8].rsplit(":", 1) if len(sys.argv) > 8 else ("127.0.0.1", "2525")
with smtplib.SMTP(smtp_host, int(smtp_port), timeout=30) as s:
    s.sendmail("probe@example.org", [user], b"Subject: live\r\n\r\nnew mail\r\n")
    sent = time.perf_counter()
for t in threads:
    t.join(30)
got = len(heard)
last = (max(heard) - sent) * 1e3 if heard else float("nan")
median = (statistics.median(heard) - sent) * 1e3 if heard else float("nan")
print(f"RESULT web_live sessions={sessions} heard={got} rss_before_kib={before} rss_after_kib={after} "
      f"kib_per_session={(after - before) / sessions:.1f} last_heard_ms={last:.1f} median_heard_ms={median:.1f}")
for conn, _ in streams:
    conn.close()

# 3. The ramp.
import os

ramp_step = int(os.environ.get("RAMP_STEP", "200"))
ramp_steps = int(os.environ.get("RAMP_STEPS", "4"))
time.sleep(2.0)
open_streams = []
points = [(0, rss_kib())]
for step in range(1, ramp_steps + 1):
    for i in range(ramp_step):
        conn, ck = login()
        conn.request("GET", "/events", headers={"Cookie": ck})
        r = conn.getresponse()
        assert r.status == 200
        open_streams.append(conn)
    time.sleep(1.0)
    points.append((len(open_streams), rss_kib()))
n = len(points)
mx = sum(x for x, _ in points) / n
my = sum(y for _, y in points) / n
slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
print("RESULT web_ramp sessions_rss_kib=" + ",".join(f"{x}:{y}" for x, y in points)
      + f" kib_per_session={slope:.1f}")
for conn in open_streams:
    conn.close()
