#!/usr/bin/env python3
"""The web view's admin pages and the login history, over HTTP, against a running server.

Driven by tests/web.rs: `web_admin.py WEB_ADDR IMAP_ADDR`. alice@example.test is an admin
(the test ran `mailstow user admin alice@example.test on`), bob@example.test is not; both have
the password `secret-pw`. Exits non-zero with a message on the first thing that is wrong.
"""

import http.cookiejar
import imaplib
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

WEB, IMAP = sys.argv[1], sys.argv[2]
BASE = f"http://{WEB}"


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
    def __init__(self, user):
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar), NoRedirect)
        status, _, _ = self.post("/login", {"username": user, "password": "secret-pw"})
        check(status == 303, f"{user} could not log in: {status}")

    def request(self, method, path, form=None):
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        req = urllib.request.Request(BASE + path, data=data, method=method)
        try:
            with self.opener.open(req, timeout=30) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode()

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, form):
        return self.request("POST", path, form)

    def csrf(self, path="/account"):
        _, _, page = self.get(path)
        marker = 'name="csrf" value="'
        at = page.find(marker)
        check(at >= 0, f"no CSRF field on {path}")
        return page[at + len(marker):].split('"', 1)[0]

    def act(self, path, form, expect=200):
        form = dict(form, csrf=self.csrf())
        status, _, body = self.post(path, form)
        check(status == expect, f"POST {path} {form}: {status}\n{body[:2000]}")
        return body


def imap_login(user, password):
    host, port = IMAP.rsplit(":", 1)
    c = imaplib.IMAP4(host, int(port))
    try:
        c.login(user, password)
        c.logout()
        return True
    except imaplib.IMAP4.error:
        return False


def main():
    bob = Browser("bob@example.test")
    for path in ["/admin", "/admin/users", "/admin/domains", "/admin/aliases", "/admin/queue",
                 "/admin/counters", "/admin/queue/show?id=1", "/admin/reports",
                 "/admin/reports/show?id=1"]:
        status, _, _ = bob.get(path)
        check(status == 403, f"bob (not an admin) got {status} at {path}")
    status, _, _ = bob.post("/admin/users/add", {"csrf": bob.csrf(), "address": "eve@example.test",
                                                 "password": "x"})
    check(status == 403, f"bob's admin POST: {status}")

    alice = Browser("alice@example.test")
    _, _, account = alice.get("/account")
    check('href="/admin"' in account, "no link to the admin pages for an admin")
    status, _, overview = alice.get("/admin")
    check(status == 200 and "Administration" in overview, f"overview: {status}")

    # A forged action (no token) does nothing.
    status, _, _ = alice.post("/admin/users/add", {"address": "eve@example.test", "password": "x"})
    check(status == 403, f"an admin POST without its token: {status}")

    body = alice.act("/admin/domains/add", {"name": "example.net"})
    check("domain added: example.net" in body and "<td>example.net</td>" in body, body[:2000])
    body = alice.act("/admin/users/add", {"address": "carol@example.net", "password": "carols-pw",
                                          "quota": "20M"})
    check("user added: carol@example.net" in body, body[:2000])
    check('<td class="address">carol@example.net</td>' in body, "carol not in the table")
    check(imap_login("carol@example.net", "carols-pw"), "carol cannot log in over IMAP")
    body = alice.act("/admin/users/quota", {"address": "carol@example.net", "quota": "1G"})
    check("quota of carol@example.net: 1G" in body, body[:2000])
    # Shorter than password_length_min (8 by default): refused with the reason, 400.
    body = alice.act("/admin/users/password", {"address": "carol@example.net",
                                               "password": "new-pw"}, expect=400)
    check("password_length_min (8 characters)" in body, body[:2000])
    body = alice.act("/admin/users/add", {"address": "dan@example.net", "password": "dans-pw"},
                     expect=400)
    check("password_length_min (8 characters)" in body, body[:2000])
    body = alice.act("/admin/users/password", {"address": "carol@example.net",
                                               "password": "new-password"})
    check(imap_login("carol@example.net", "new-password"), "the reset password does not work")
    check(not imap_login("carol@example.net", "carols-pw"), "the old password still works")
    body = alice.act("/admin/aliases/add", {"source": "team@example.net",
                                            "destination": "carol@example.net"})
    check("<td>team@example.net</td>" in body, body[:2000])
    body = alice.act("/admin/aliases/delete", {"source": "team@example.net",
                                               "destination": "carol@example.net"})
    check("<td>team@example.net</td>" not in body, "the alias is still listed")
    # Refusals come back as the page with the reason, 400.
    body = alice.act("/admin/domains/delete", {"name": "example.net"}, expect=400)
    check('role="alert"' in body, body[:2000])
    body = alice.act("/admin/users/delete", {"address": "alice@example.test"}, expect=400)
    # The admin right, given and taken on the page.
    alice.act("/admin/users/admin", {"address": "bob@example.test", "on": "on"})
    check(bob.get("/admin")[0] == 200, "bob made admin but still refused")
    alice.act("/admin/users/admin", {"address": "bob@example.test", "on": "off"})
    check(bob.get("/admin")[0] == 403, "bob's right taken away but still admitted")
    body = alice.act("/admin/users/delete", {"address": "carol@example.net"})
    check("user removed: carol@example.net" in body, body[:2000])
    check(not imap_login("carol@example.net", "new-pw"), "a deleted user logs in")
    alice.act("/admin/domains/delete", {"name": "example.net"})

    status, _, queue = alice.get("/admin/queue")
    check(status == 200 and "Queue" in queue, f"queue page: {status}")
    status, _, _ = alice.get("/admin/queue/show?id=999999")
    check(status == 404, f"a message not in the queue: {status}")
    body = alice.act("/admin/queue/retry", {"id": "999999"}, expect=400)
    check("not in the queue" in body, body[:2000])
    status, _, counters = alice.get("/admin/counters")
    check(status == 200 and "mailstow_" in counters, f"counters: {status}")

    # The reports page, read-only: none received or sent yet, no ACME directory.
    status, _, reports = alice.get("/admin/reports")
    check(status == 200 and "No report received." in reports and "No report sent." in reports
          and "self-signed or configured" in reports, f"reports: {status}\n{reports[:3000]}")
    status, _, _ = alice.get("/admin/reports/show?id=1")
    check(status == 404, f"a report never received: {status}")

    # The login history: a wrong IMAP password for bob from this address, then the page.
    check(not imap_login("bob@example.test", "wrong"), "a wrong password was accepted")
    check(imap_login("bob@example.test", "secret-pw"), "bob cannot log in over IMAP")
    _, _, page = bob.get("/account")
    check("wrong password" in page and "imap" in page and "127.0.0.1" in page,
          f"the failed IMAP login is not on bob's account page:\n{page[:3000]}")
    check("logged in" in page and "web" in page, "the web login is not on the page")
    print("web admin: ok")


if __name__ == "__main__":
    main()
