#!/usr/bin/env python3
"""NeoMutt, a real terminal client, shows mailstow's INBOX threaded and sorted correctly.

usage: neomutt_threads.py IMAPS_ADDR USER PASSWORD

The account's INBOX must hold no other mail. Steps:
 1. imaplib (TLS, certificate not verified) APPENDs nine messages, out of date order: two
    threads chained by In-Reply-To/References (one three levels deep with a later sibling),
    two replies to a message the folder does not hold, and a lone message; Date headers in
    several time zones (+0200, -0500, +1200), so that ordering by the clock time written
    instead of UTC would give a different order;
 2. a throwaway neomuttrc (the server's certificate stored in certificate_file beforehand,
    ssl_verify_host off, no header cache, sort=threads, ascii_chars) and NeoMutt started in
    a private tmux server (its own socket) on a 200x50 pane, with a debug log (-d 5: every
    command and answer);
 3. once the index shows all nine messages (and stays the same): the thread view must be
    exactly the expected rows, in order, each reply under its parent with the tree drawn
    as expected (`|->`, `| `->`, `` `-> ``, and `-->` for the first of two replies whose
    parent is missing);
 4. `:set sort=reverse-date`: the flat view must list the nine newest first, no tree;
 5. `q`: NeoMutt must exit with status 0;
 6. NeoMutt's debug log must show it connected to IMAPS_ADDR, logged in, selected INBOX and
    fetched headers (NeoMutt threads and sorts on its own: it never sends SORT or THREAD);
 7. the server's own answers must agree with what NeoMutt showed: UID THREAD REFERENCES
    gives the same tree in the same order (the missing parent as a dummy, "((7)(8))"),
    UID SORT (REVERSE DATE) the same order.
Prints `neomutt-threads: OK` and the timings; any failure exits 1 with the captured
screen (and the end of the debug log). The tmux server is killed in all cases.
Env: NEOMUTT (neomutt), TMUX_BIN (tmux), TIMEOUT (60 s for the whole run), KEEP (1: keep
the temporary directory and print its path).
"""
import imaplib
import os
import re
import shlex
import shutil
import ssl
import subprocess
import sys
import tempfile
import time

if len(sys.argv) != 4:
    sys.exit(__doc__)
addr, user, password = sys.argv[1:4]
host, port = addr.rsplit(":", 1)
NEOMUTT = os.environ.get("NEOMUTT", "neomutt")
TMUX = os.environ.get("TMUX_BIN", "tmux")
STARTED = time.monotonic()
DEADLINE = STARTED + float(os.environ.get("TIMEOUT", "60"))
WIDTH, HEIGHT = 200, 50

# name, Message-ID, References (the last one is In-Reply-To too), Date, Subject; every
# Message-ID is <id@example.test>. Appended in this order, so arrival order is neither
# date nor thread order.
MESSAGES = [
    ("Dan", "a4", ["a1"], "Sat, 02 Mar 2024 08:00:00 +0000", "Re: Project plan"),
    ("Gus", "c1", [], "Wed, 28 Feb 2024 07:00:00 +0000", "Server maintenance window"),
    # 12:00 +0200 is 10:00 UTC: after Ann, before Eve and Cat.
    ("Bob", "a2", ["a1"], "Fri, 01 Mar 2024 12:00:00 +0200", "Re: Project plan"),
    # d1, their parent, is not in the folder.
    ("Hal", "d3", ["d1"], "Fri, 01 Mar 2024 14:00:00 +0000", "Re: Budget"),
    ("Fay", "b2", ["b1"], "Sun, 03 Mar 2024 12:00:00 +0000", "Re: Lunch on Friday"),
    ("Ann", "a1", [], "Fri, 01 Mar 2024 09:00:00 +0000", "Project plan"),
    # 01:00 +1200 on the 2nd is 13:00 UTC on the 1st: before Hal.
    ("Ivy", "d2", ["d1"], "Sat, 02 Mar 2024 01:00:00 +1200", "Re: Budget"),
    # 05:30 -0500 is 10:30 UTC: after Bob, before Cat.
    ("Eve", "b1", [], "Fri, 01 Mar 2024 05:30:00 -0500", "Lunch on Friday"),
    ("Cat", "a3", ["a1", "a2"], "Fri, 01 Mar 2024 11:00:00 +0000", "Re: Project plan"),
]
# The thread view (sort=threads, sort_aux=date: threads by their root's date, replies by
# date; the two replies to d1 under its hidden place, by the first one's date): name, tree
# drawn before the subject, subject.
THREADED = [
    ("Gus", "", "Server maintenance window"),
    ("Ann", "", "Project plan"),
    ("Bob", "|->", "Re: Project plan"),
    ("Cat", "| `->", "Re: Project plan"),
    ("Dan", "`->", "Re: Project plan"),
    ("Eve", "", "Lunch on Friday"),
    ("Fay", "`->", "Re: Lunch on Friday"),
    ("Ivy", "-->", "Re: Budget"),
    ("Hal", "`->", "Re: Budget"),
]
# sort=reverse-date, flat: newest first (by UTC).
REVERSE_DATE = ["Fay", "Dan", "Hal", "Ivy", "Cat", "Eve", "Bob", "Ann", "Gus"]
NAMES = {m[0] for m in MESSAGES}

tmp = tempfile.mkdtemp(prefix="neomutt-threads-")
sock = os.path.join(tmp, "tmux.sock")
log = os.path.join(tmp, "neomutt.log")
screen = ""          # the last capture, shown on a failure
timings = []


def left():
    return DEADLINE - time.monotonic()


def mark(what):
    timings.append(f"{what} {time.monotonic() - STARTED:.1f}s")


def tmux(*args, check=True):
    return subprocess.run([TMUX, "-S", sock, *args], capture_output=True, text=True,
                          check=check, timeout=max(1, min(10, left() + 1)))


def capture():
    global screen
    screen = tmux("capture-pane", "-p", "-t", "neomutt", check=False).stdout
    return screen


def fail(why):
    print(f"neomutt-threads: FAIL: {why}")
    print(f"---- screen ({WIDTH}x{HEIGHT}), last capture:")
    print(screen.rstrip("\n") if screen.strip() else "(empty)")
    print("---- end of screen")
    debug_log = newest_log()
    if debug_log:
        with open(debug_log, errors="replace") as f:
            lines = f.readlines()
        print(f"---- last 40 lines of {debug_log}")
        print("".join(lines[-40:]).rstrip("\n"))
    print("timings: " + ", ".join(timings))
    sys.exit(1)


def newest_log():
    """NeoMutt's debug log (it may add a number to the name given with -l)."""
    found = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.startswith("neomutt.log")]
    return max(found, key=os.path.getmtime) if found else None


# An index row, as index_format below draws it: "@@ <number> <name> : <tree><subject>".
ROW = re.compile(r"@@ +(\d+) (\w+) +: (.*?)\s*$")


def rows(text):
    """(name, tree, subject) of every index row on the screen."""
    out = []
    for line in text.splitlines():
        m = ROW.search(line)
        if m:
            rest = m.group(3)
            split = re.match(r"([|` -]*->|)(.*)$", rest)
            out.append((m.group(2), split.group(1).rstrip(), split.group(2)))
    return out


def wait_for(what, done, poll=0.2):
    """Polls the screen until `done(rows)` holds on two captures in a row."""
    previous = None
    while left() > 0:
        text = capture()
        if re.search(r"\(r\)eject|accept \(o\)nce", text):
            fail("NeoMutt asked about the server's certificate (it was stored beforehand)")
        if "[neomutt exited" in text:
            fail(f"NeoMutt exited while waiting for {what}")
        current = rows(text)
        if done(current) and current == previous:
            return current
        previous = current if done(current) else None
        time.sleep(poll)
    fail(f"timed out waiting for {what}")


def imap():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    c = imaplib.IMAP4_SSL(host, int(port), ssl_context=ctx, timeout=max(1, left()))
    c.login(user, password)
    return c


def ok(result, what):
    typ, data = result
    if typ != "OK":
        fail(f"{what}: {typ} {data!r}")
    return data


def rc_quote(value):
    return '"' + re.sub(r'(["\\$`])', r"\\\1", value) + '"'


def parse_thread(text):
    """RFC 5256 THREAD data -> [(uid, depth)] in order. A dummy (a missing parent, "((1)(2))")
    is no row, but its children are one level below it, as NeoMutt draws them."""
    tokens = re.findall(r"\(|\)|\d+", text)
    out = []
    pos = 0

    def thread_list(depth):
        # After "(": numbers, each the child of the one before, then sub-lists: the last
        # number's children.
        nonlocal pos
        d = depth + 1 if tokens[pos] == "(" else depth  # "((": under a dummy
        while tokens[pos] not in "()":
            out.append((int(tokens[pos]), d))
            d += 1
            pos += 1
        while tokens[pos] == "(":
            pos += 1
            thread_list(d)
        assert tokens[pos] == ")", text
        pos += 1

    while pos < len(tokens):
        assert tokens[pos] == "(", text
        pos += 1
        thread_list(0)
    return out


try:
    for tool in (NEOMUTT, TMUX):
        if not shutil.which(tool):
            fail(f"{tool} is not installed (scripts/test.sh installs it)")
    version = subprocess.run([NEOMUTT, "-v"], capture_output=True, text=True).stdout
    print(version.splitlines()[0] if version else "neomutt: no version",
          "|", subprocess.run([TMUX, "-V"], capture_output=True, text=True).stdout.strip(),
          f"| server {addr} user {user}")

    # 1. The messages.
    c = imap()
    ok(c.select("INBOX"), "SELECT INBOX")
    if int(c.untagged_responses.get("EXISTS", [b"0"])[-1]) != 0:
        fail("INBOX is not empty")
    by_id = {}
    for name, mid, references, date, subject in MESSAGES:
        headers = [f"From: {name} <{name.lower()}@example.test>", f"To: {user}",
                   f"Date: {date}", f"Subject: {subject}", f"Message-ID: <{mid}@example.test>"]
        by_id[mid] = name
        if references:
            headers.append(f"In-Reply-To: <{references[-1]}@example.test>")
            headers.append("References: " + " ".join(f"<{r}@example.test>" for r in references))
        body = "\r\n".join(headers) + f"\r\n\r\nHello from {name}.\r\n"
        ok(c.append("INBOX", None, None, body.encode()), f"APPEND {name}")
    mark("appended")

    # 2. NeoMutt in tmux. The certificate is stored beforehand, so no question is asked.
    cert = ssl.get_server_certificate((host, int(port)))
    with open(os.path.join(tmp, "certificates"), "w") as f:
        f.write(cert)
    home = os.path.join(tmp, "home")
    os.mkdir(home)
    rc = os.path.join(tmp, "neomuttrc")
    with open(rc, "w") as f:
        f.write(f"""\
set imap_user = {rc_quote(user)}
set imap_pass = {rc_quote(password)}
set folder = "imaps://{host}:{port}/"
set spoolfile = "+INBOX"
set record = ""
set postponed = "+Drafts"
set ssl_force_tls = yes
set ssl_verify_host = no
set ssl_verify_dates = no
set certificate_file = "{tmp}/certificates"
set imap_check_subscribed = no
set mail_check_stats = no
set header_cache = ""
set message_cachedir = ""
set tmpdir = "{tmp}"
set sort = threads
set sort_aux = date
set ascii_chars = yes
set hide_thread_subject = no
set narrow_tree = no
set index_format = "@@ %3C %-5.5n : %s"
set quit = yes
set move = no
set mark_old = no
set sleep_time = 0
set wait_key = no
set help = no
set sidebar_visible = no
""")
    q = shlex.quote
    command = (f"env -u TMUX HOME={q(home)} TZ=UTC LC_ALL=C.UTF-8 "
               f"{q(NEOMUTT)} -n -F {q(rc)} -d 5 -l {q(log)}; "
               'echo "[neomutt exited with status $?]"; sleep 600')
    tmux("new-session", "-d", "-s", "neomutt", "-x", str(WIDTH), "-y", str(HEIGHT), command)

    # 3. The thread view.
    shown = wait_for("the index with all nine messages",
                     lambda r: {x[0] for x in r} == NAMES and len(r) == len(NAMES))
    mark("index shown")
    if shown != THREADED:
        fail("the thread view is not the expected one:\n  expected "
             + "\n           ".join(map(repr, THREADED))
             + "\n  shown    " + "\n           ".join(map(repr, shown)))
    threaded_screen, threaded = screen, shown

    # 4. Sorted by date, newest first.
    tmux("send-keys", "-t", "neomutt", "-l", ":set sort=reverse-date")
    tmux("send-keys", "-t", "neomutt", "Enter")
    shown = wait_for("the reverse-date view",
                     lambda r: [x[0] for x in r] == REVERSE_DATE and all(not x[1] for x in r))
    mark("reverse-date shown")
    subjects = {m[0]: m[4] for m in MESSAGES}
    if [x[2] for x in shown] != [subjects[n] for n in REVERSE_DATE]:
        fail(f"subjects in the reverse-date view: {shown}")
    date_screen = screen

    # 5. Quit.
    tmux("send-keys", "-t", "neomutt", "q")
    while "[neomutt exited" not in capture():
        if left() <= 0:
            fail("NeoMutt did not quit on q")
        time.sleep(0.1)
    if "[neomutt exited with status 0]" not in screen:
        fail("NeoMutt's exit status was not 0")
    mark("quit")

    # 6. The debug log: NeoMutt spoke IMAP to this server.
    debug_log = newest_log()
    if not debug_log:
        fail(f"no debug log ({log}*)")
    with open(debug_log, errors="replace") as f:
        text = f.read()
    # "4> a0004 SELECT ..." (pipelined commands follow on lines of their own).
    verbs = re.findall(r"^(?:.*\d> )?a\d{4} ((?:UID )?[A-Z]+)", text, re.M)
    summary = {}
    for v in verbs:
        summary[v] = summary.get(v, 0) + 1
    for needed, pattern in [
        ("the connection to the server", rf"{re.escape(host)}.*{port}|{port}.*{re.escape(host)}"),
        ("the login", r"> a\d{4} (LOGIN|AUTHENTICATE)"),
        ("SELECT or EXAMINE of INBOX", r"> a\d{4} (SELECT|EXAMINE) \"?INBOX"),
        ("a FETCH of the headers", r"> a\d{4} (UID )?FETCH .*(HEADER|ENVELOPE)"),
        ("a tagged OK from the server", r"< a\d{4} OK"),
    ]:
        if not re.search(pattern, text):
            fail(f"the debug log {debug_log} lacks {needed} ({pattern})")
    server_side = [v for v in verbs if v.split()[-1] in ("SORT", "THREAD")]
    print("neomutt sent: " + ", ".join(f"{v} x{n}" for v, n in summary.items())
          + ("" if server_side else " (no SORT or THREAD: it threads and sorts itself)"))

    # 7. The server's SORT and THREAD agree with what NeoMutt showed.
    c = imap()
    ok(c.select("INBOX", readonly=True), "EXAMINE INBOX")
    data = ok(c.uid("FETCH", "1:*", "(BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])"), "UID FETCH")
    name_of = {}
    for item in data:
        if isinstance(item, tuple):
            uid = int(re.search(rb"UID (\d+)", item[0]).group(1))
            mid = re.search(rb"<(\w+)@", item[1]).group(1).decode()
            name_of[uid] = by_id[mid]
    thread = ok(c.uid("THREAD", "REFERENCES", "UTF-8", "ALL"), "UID THREAD REFERENCES")[0]
    server_tree = [(name_of[u], d) for u, d in parse_thread(thread.decode())]
    # NeoMutt draws two columns per level, then "->": depth (len - 1) / 2.
    neomutt_tree = [(n, (len(tree) - 1) // 2 if tree else 0) for n, tree, _ in threaded]
    if server_tree != neomutt_tree:
        fail(f"UID THREAD REFERENCES ALL answered {thread!r}: {server_tree}, "
             f"but NeoMutt showed {neomutt_tree}")
    order = ok(c.uid("SORT", "(REVERSE DATE)", "UTF-8", "ALL"), "UID SORT")[0].split()
    server_order = [name_of[int(u)] for u in order]
    if server_order != REVERSE_DATE:
        fail(f"UID SORT (REVERSE DATE) answered {order}: {server_order}, "
             f"but NeoMutt showed {REVERSE_DATE}")
    c.logout()
    mark("server agrees")

    print("---- thread view")
    print("\n".join(line.rstrip() for line in threaded_screen.splitlines() if ROW.search(line)))
    print("---- reverse-date view")
    print("\n".join(line.rstrip() for line in date_screen.splitlines() if ROW.search(line)))
    print("timings: " + ", ".join(timings))
    print("neomutt-threads: OK")
finally:
    subprocess.run([TMUX, "-S", sock, "kill-server"], capture_output=True, timeout=10)
    if os.environ.get("KEEP") == "1":
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
