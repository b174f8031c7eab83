#!/usr/bin/env python3
"""The web view through Python's HTTP client and cookie jar, against a running server.

Driven by tests/web.rs: `web_session.py WEB_ADDR SMTP_ADDR IMAP_ADDR`. Users alice@example.test and
bob@example.test exist with the password `secret-pw`. Delivers mail with smtplib, then logs in
over HTTP and checks what a browser would see: the list from the summaries, the message,
its attachment, flags, and the refusals (wrong password, forged form, another user's
message, logged out). Exits non-zero with a message on the first thing that is wrong.
"""

import http.cookiejar
import imaplib
import smtplib
import sys
import urllib.error
import urllib.parse
import urllib.request
from email.message import EmailMessage

WEB, SMTP = sys.argv[1], sys.argv[2]
BASE = f"http://{WEB}"
PDF = b"%PDF-1.4\n% a small file\n" + bytes(range(256))


def fail(why):
    print(f"FAIL: {why}", file=sys.stderr)
    sys.exit(1)


def check(cond, why):
    if not cond:
        fail(why)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Browser:
    def __init__(self):
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar), NoRedirect)

    def request(self, method, path, form=None):
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        req = urllib.request.Request(BASE + path, data=data, method=method)
        try:
            with self.opener.open(req, timeout=30) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, form):
        return self.request("POST", path, form)

    def csrf(self, page):
        marker = b'name="csrf" value="'
        at = page.find(marker)
        check(at >= 0, "no CSRF field on the page")
        return page[at + len(marker):].split(b'"', 1)[0].decode()


def deliver(to, subject, text, attachment=None, html=None, cte=None):
    m = EmailMessage()
    m["From"] = "Sender <sender@example.net>"
    m["To"] = to
    m["Subject"] = subject
    if cte:
        m.set_content(text, cte=cte)
    else:
        m.set_content(text)
    if html is not None:
        m.add_alternative(html, subtype="html")
    if attachment is not None:
        m.add_attachment(attachment, maintype="application", subtype="pdf", filename="report.pdf")
    with smtplib.SMTP(*SMTP.rsplit(":", 1), timeout=30) as s:
        s.send_message(m)


def wait_for(browser, path, needle):
    import time
    for _ in range(100):
        status, _, body = browser.get(path)
        if status == 200 and needle in body:
            return body
        time.sleep(0.1)
    fail(f"{needle!r} never appeared at {path}: {status} {body[:300]!r}")


def main():
    deliver("alice@example.test", "Quarterly <report>",
            "Hello Alice,\n\nthe numbers are attached.\n", attachment=PDF)
    deliver("bob@example.test", "Bob's secret", "Only for Bob.\n")
    # A word past the preview, in a base64 body: search decodes the text.
    deliver("alice@example.test", "Minutes", "filler " * 80 + "the word is kumquat.\n", cte="base64")

    b = Browser()
    status, headers, _ = b.get("/mail")
    check(status == 303 and headers.get("Location") == "/login", f"not sent to log in: {status}")

    status, _, body = b.post("/login", {"username": "alice@example.test", "password": "wrong"})
    check(status == 401 and b"Wrong address or password." in body, f"wrong password: {status}")
    check(not list(b.jar), "a cookie for a wrong password")

    status, headers, _ = b.post("/login", {"username": "alice@example.test", "password": "secret-pw"})
    check(status == 303, f"login: {status}")
    cookie = headers.get("Set-Cookie", "")
    check("HttpOnly" in cookie and "SameSite=Strict" in cookie, f"cookie: {cookie}")

    page = wait_for(b, "/mail", b"Quarterly &#60;report&#62;")
    page = wait_for(b, "/mail", b"Minutes")
    check(b"the numbers are attached." in page, "no preview in the list")
    check(b"has attachments" in page, "no attachment mark in the list")
    check(b"Bob" not in page, "Bob's mail in Alice's list")
    status, headers, _ = b.get("/mail")
    csp = headers.get("Content-Security-Policy", "")
    check("default-src 'none'" in csp and "script-src 'self';" in csp and "unsafe" not in csp,
          f"CSP: {csp}")

    row = page[:page.index(b">Quarterly")]
    uid = row[row.rindex(b"&amp;uid=") + len(b"&amp;uid="):].split(b'"', 1)[0].decode()
    status, _, message = b.get(f"/message?folder=INBOX&uid={uid}")
    check(status == 200 and b"Hello Alice," in message, f"message: {status}")
    check(b"report.pdf" in message, "attachment not listed")
    part = message.split(b"/message/part?", 1)[1].split(b'"', 1)[0].decode().replace("&amp;", "&")
    status, headers, data = b.get(f"/message/part?{part}")
    check(status == 200 and data == PDF, f"attachment: {status}, {len(data)} bytes")
    check("attachment" in headers.get("Content-Disposition", ""), "attachment not a download")

    # Bob's message is UID 1 of his INBOX: Alice's session cannot reach it.
    status, _, body = b.get("/message?folder=INBOX&uid=99")
    check(status == 404, f"a missing message: {status}")
    status, _, body = b.get("/mail?folder=Nope")
    check(status == 404, f"a missing folder: {status}")

    token = b.csrf(message)
    status, _, _ = b.post("/message/flag", {"folder": "INBOX", "uid": uid, "flag": "flagged", "on": "1"})
    check(status == 403, f"a form without its CSRF token: {status}")
    status, _, _ = b.post("/message/flag", {"csrf": token, "folder": "INBOX", "uid": uid, "flag": "flagged", "on": "1"})
    check(status == 303, f"flag: {status}")
    page = b.get("/mail")[2]
    check(b"flagged" in page, "not flagged in the list")

    # New mail without a reload: /events says `changed` when a message arrives.
    import threading
    heard = []
    req = urllib.request.Request(BASE + "/events")
    stream = b.opener.open(req, timeout=20)
    check(stream.headers.get("Content-Type", "").startswith("text/event-stream"), "not an event stream")

    def listen():
        for line in stream:
            if line.startswith(b"event: changed"):
                heard.append(line)
                return

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    deliver("alice@example.test", "Live one", "Arrived while the list was open.\n")
    listener.join(15)
    check(heard, "no `changed` event for new mail")
    stream.close()
    wait_for(b, "/mail", b"Live one")

    # Search: the word is only in the decoded body, past the preview.
    status, _, found = b.get("/search?folder=INBOX&q=KUMQUAT")
    check(status == 200 and b"Minutes" in found and b"Quarterly" not in found, f"search: {status}")
    check(b"1 found for" in found, "search count")
    # Delete to the Trash, then empty it.
    status, _, _ = b.post("/message/delete", {"csrf": token, "folder": "INBOX", "uid": uid})
    check(status == 303, f"delete: {status}")
    page = b.get("/mail")[2]
    check(b"Quarterly" not in page, "deleted message still in INBOX")
    trash = wait_for(b, "/mail?folder=Trash", b"Quarterly")
    check(b"Empty Trash" in trash, "no Empty Trash")
    # A second delete, with the Trash there already.
    live_uid = b.get("/mail")[2].split(b'data-uid="', 1)[1].split(b'"', 1)[0].decode()
    status, _, _ = b.post("/message/delete", {"csrf": token, "folder": "INBOX", "uid": live_uid})
    check(status == 303, f"a second delete: {status}")
    wait_for(b, "/mail?folder=Trash", b"Live one")
    status, _, _ = b.post("/folder/empty", {"csrf": token, "folder": "Trash"})
    check(status == 303, f"empty: {status}")
    check(b"No messages." in b.get("/mail?folder=Trash")[2], "Trash not empty")

    # Write to Bob with a file; he gets it over IMAP, Alice keeps it in Sent.
    boundary = "----mailstowtest"
    parts = []
    for name, value in [("csrf", token), ("to", "bob@example.test"), ("subject", "Figures for Bob"),
                        ("body", "Here they are.")]:
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="attachment"; filename="figures.pdf"\r\n'
                 f'Content-Type: application/pdf\r\n\r\n'.encode() + PDF + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    req = urllib.request.Request(BASE + "/compose", data=b"".join(parts), method="POST",
                                 headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    try:
        with b.opener.open(req, timeout=30) as r:
            status = r.status
    except urllib.error.HTTPError as e:
        status = e.code
        check(status == 303, f"compose: {status} {e.read()[:500]!r}")
    check(status == 303, f"compose: {status}")
    wait_for(b, "/mail?folder=Sent", b"Figures for Bob")

    status, _, _ = b.post("/logout", {"csrf": token})
    check(status == 303, f"logout: {status}")
    status, headers, _ = b.get("/mail")
    check(status == 303 and headers.get("Location") == "/login", f"still logged in: {status}")

    bob = Browser()
    status, _, _ = bob.post("/login", {"username": "bob@example.test", "password": "secret-pw"})
    check(status == 303, f"bob's login: {status}")
    page = wait_for(bob, "/mail", b"Bob&#39;s secret")
    check(b"Quarterly" not in page, "Alice's mail in Bob's list")

    # The account page, and a password change that IMAP and the web then both take.
    status, _, account = bob.get("/account")
    check(status == 200 and b"bob@example.test" in account and b"Last login" in account,
          f"account: {status}")
    token = bob.csrf(account)
    # Alice's message reached Bob's INBOX, attachment and all, over IMAP.
    import email, ssl, time
    host, port = sys.argv[3].rsplit(":", 1)
    for _ in range(100):
        with imaplib.IMAP4(host, int(port)) as imap:
            imap.starttls(ssl_context=ssl._create_unverified_context())
            imap.login("bob@example.test", "secret-pw")
            imap.select("INBOX")
            _, found = imap.search(None, "SUBJECT", '"Figures for Bob"')
            if found[0]:
                _, data = imap.fetch(found[0].split()[0], "(BODY.PEEK[])")
                received = email.message_from_bytes(data[0][1])
                break
        time.sleep(0.1)
    else:
        fail("Alice's message never reached Bob")
    check("alice@example.test" in received["From"], f"From: {received['From']}")
    files = [p for p in received.walk() if p.get_filename() == "figures.pdf"]
    check(files and files[0].get_payload(decode=True) == PDF, "the attachment did not arrive whole")

    # Shorter than password_length_min (8 by default): refused, naming the rule.
    status, _, body = bob.post("/account/password", {"csrf": token, "current": "secret-pw",
                                                     "new": "n3w", "again": "n3w"})
    check(status == 400 and b"password_length_min (8 characters)" in body,
          f"a short password: {status} {body[:2000]}")
    status, _, body = bob.post("/account/password", {"csrf": token, "current": "secret-pw",
                                                     "new": "n3w-secret", "again": "n3w-secret"})
    check(status == 200 and b"Your password was changed." in body, f"password change: {status}")
    with imaplib.IMAP4(host, int(port)) as imap:
        imap.starttls(ssl_context=ssl._create_unverified_context())
        imap.login("bob@example.test", "n3w-secret")
    fresh = Browser()
    status, _, _ = fresh.post("/login", {"username": "bob@example.test", "password": "secret-pw"})
    check(status == 401, f"the old password still works: {status}")
    print("OK")


main()
