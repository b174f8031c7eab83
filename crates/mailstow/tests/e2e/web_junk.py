#!/usr/bin/env python3
"""Moves a message into Junk through the web view, as a user's "Junk" click would.

Driven by tests/spam.rs: `web_junk.py WEB_ADDR FOLDER UID DEST`. Logs in as
alice@example.test (password `secret-pw`), reads the message's page for its CSRF token and
posts the move. Exits non-zero with a message on the first thing that is wrong.
"""

import http.cookiejar
import sys
import urllib.error
import urllib.parse
import urllib.request

WEB, FOLDER, UID, DEST = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
BASE = f"http://{WEB}"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


opener = urllib.request.build_opener(
    urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), NoRedirect)


def request(method, path, form=None):
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    try:
        with opener.open(urllib.request.Request(BASE + path, data=data, method=method), timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


status, _ = request("POST", "/login", {"username": "alice@example.test", "password": "secret-pw"})
if status != 303:
    sys.exit(f"login: {status}")
query = urllib.parse.urlencode({"folder": FOLDER, "uid": UID})
status, page = request("GET", f"/message?{query}")
if status != 200:
    sys.exit(f"message page: {status}")
marker = b'name="csrf" value="'
at = page.find(marker)
if at < 0:
    sys.exit("no CSRF field on the message page")
token = page[at + len(marker):].split(b'"', 1)[0].decode()
status, _ = request("POST", "/message/move", {"csrf": token, "folder": FOLDER, "uid": UID, "dest": DEST})
if status != 303:
    sys.exit(f"move: {status}")
