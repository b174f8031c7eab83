#!/usr/bin/env python3
"""The web view in a cluster: a user of one node served by another node's view.

Driven by tests/cluster.rs, in two phases:
  web_cluster.py use WEB_A SMTP JAR USER   log in as USER (of another node) on WEB_A, see a
                                          message delivered by SMTP, open it, flag it, keep
                                          the cookies in JAR;
  web_cluster.py down WEB_A JAR USER2      with USER's node stopped: USER's pages on WEB_A are
                                          503 "temporarily unavailable", while USER2 (of a
                                          live node) logs in on WEB_A and reads their list.
The password is `secret-pw`. Exits non-zero with a message on the first thing that is wrong.
"""

import http.cookiejar
import smtplib
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from email.message import EmailMessage


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
    def __init__(self, web, jar_path=None):
        self.base = f"http://{web}"
        self.jar = http.cookiejar.LWPCookieJar(jar_path) if jar_path else http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar), NoRedirect)

    def request(self, method, path, form=None, headers=None):
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers=headers or {})
        try:
            with self.opener.open(req, timeout=30) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode()

    def cookies(self):
        return {c.name: c.value for c in self.jar}

    def csrf(self, page):
        marker = 'name="csrf" value="'
        at = page.find(marker)
        check(at >= 0, "no CSRF field on the page")
        return page[at + len(marker):].split('"', 1)[0]


def use(web, smtp, jar_path, user):
    m = EmailMessage()
    m["From"] = "sender@example.net"
    m["To"] = user
    m["Subject"] = "Read me on another node"
    m.set_content("This message lives on its owner's node.\n")
    host, port = smtp.rsplit(":", 1)
    with smtplib.SMTP(host, int(port), timeout=30) as s:
        s.send_message(m)

    b = Browser(web, jar_path)
    # A browser cannot claim another address with the nodes' header.
    forged = {"x-mailstow-forwarded": f"v1 {int(time.time())} n1 192.0.2.66 " + "0" * 64}
    status, _, _ = b.request("POST", "/login", {"username": user, "password": "wrong"}, forged)
    check(status == 401, f"a wrong password through the forwarding node: {status}")
    status, headers, _ = b.request("POST", "/login", {"username": user, "password": "secret-pw"})
    check(status == 303, f"login of {user} on {web}: {status}")
    cookies = b.cookies()
    check("mailstow_session" in cookies and "mailstow_node" in cookies,
          f"cookies after the login: {cookies}")
    node_cookie = [v for k, v in headers.items() if k.lower() == "set-cookie"
                   and v.startswith("mailstow_node=")]
    check(node_cookie and "HttpOnly" in node_cookie[0] and "SameSite=Strict" in node_cookie[0],
          f"the node cookie: {node_cookie}")
    for _ in range(100):
        status, _, page = b.request("GET", "/mail")
        if status == 200 and "Read me on another node" in page:
            break
        time.sleep(0.1)
    else:
        fail(f"the message never appeared in {user}'s list on {web}: {status} {page[:500]}")
    check(user in page, "the list is not the user's")
    uid = page.split('data-uid="', 1)[1].split('"', 1)[0]
    status, _, message = b.request("GET", f"/message?folder=INBOX&uid={uid}")
    check(status == 200 and "lives on its owner" in message, f"open: {status}")
    status, _, _ = b.request("POST", "/message/flag", {
        "csrf": b.csrf(message), "folder": "INBOX", "uid": uid, "flag": "flagged", "on": "1"})
    check(status in (200, 303), f"flag: {status}")
    status, _, account = b.request("GET", "/account")
    check(status == 200 and user in account, f"account: {status}")
    check("192.0.2.66" not in account, "the forged address reached the login history")
    check("127.0.0.1" in account, f"the browser's address is not in the history:\n{account[:3000]}")
    b.jar.save(ignore_discard=True)
    print("web cluster use: ok")


def down(web, jar_path, other):
    b = Browser(web, jar_path)
    b.jar.load(ignore_discard=True)
    deadline = time.time() + 20
    while True:
        status, _, page = b.request("GET", "/mail")
        if status == 503:
            check("Temporarily unavailable" in page, page[:500])
            break
        check(time.time() < deadline, f"no 503 for the stopped node's user: {status}")
        time.sleep(0.2)
    started = time.time()
    status, _, page = b.request("GET", "/account")
    check(status == 503 and time.time() - started < 2, f"account of a down node's user: {status}")
    c = Browser(web)
    status, _, _ = c.request("POST", "/login", {"username": other, "password": "secret-pw"})
    check(status == 303, f"{other} (of a live node) could not log in: {status}")
    status, _, page = c.request("GET", "/mail")
    check(status == 200 and "INBOX" in page, f"{other}'s list: {status}")
    print("web cluster down: ok")


if __name__ == "__main__":
    if sys.argv[1] == "use":
        use(*sys.argv[2:6])
    else:
        down(*sys.argv[2:5])
