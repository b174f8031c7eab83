#!/usr/bin/python3
"""A ManageSieve (RFC 5804) session with python3-sievelib, Debian's package (run by
/usr/bin/python3, which has it): STARTTLS (or implicit TLS), AUTHENTICATE PLAIN, the
capabilities, then every script command. Fails (exit 1, with the step) on the first answer
that is not the expected one; prints `ok` at the end.

Usage: managesieve_sievelib.py HOST:PORT USER PASSWORD starttls|implicit EXTENSIONS SCRIPT_BYTES_MAX

EXTENSIONS: the SIEVE capability the server must announce, space-separated, in order.
The server's certificate is self-signed: it is not verified.
"""
import socket
import ssl
import sys

from sievelib import managesieve

address, user, password, mode, extensions, script_bytes_max = sys.argv[1:7]
host, port = address.rsplit(":", 1)
script_bytes_max = int(script_bytes_max)

context = ssl.create_default_context()
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE

# sievelib upgrades with ssl.wrap_socket (gone in Python 3.12): the same, unverified.
ssl.wrap_socket = lambda sock, keyfile=None, certfile=None: context.wrap_socket(sock)

if mode == "implicit":
    # sievelib speaks STARTTLS only: hand it a socket that is TLS from the start.
    plain_connect = socket.create_connection

    def tls_connect(*args, **kwargs):
        return context.wrap_socket(plain_connect(*args, **kwargs), server_hostname=host)

    managesieve.socket.create_connection = tls_connect


def check(step, condition, client=None):
    if not condition:
        detail = ""
        if client is not None:
            detail = " (%r %r)" % (getattr(client, "errcode", None), getattr(client, "errmsg", None))
        print("FAILED: %s%s" % (step, detail))
        sys.exit(1)


client = managesieve.Client(host, int(port))
managesieve.Client.read_timeout = 30
check("connect and login", client.connect(user, password, starttls=(mode == "starttls"), authmech="PLAIN"), client)
check("SASL PLAIN announced", client.get_sasl_mechanisms() == ["PLAIN"])
check("SIEVE capability %r" % client.get_sieve_capabilities(), client.get_sieve_capabilities() == extensions.split())
check("IMPLEMENTATION", client.get_implementation().startswith("mailstow"))

rules = 'require ["fileinto"];\r\nif header :contains "subject" "report" {\r\n  fileinto "Reports";\r\n}\r\n'
vacation = 'require "vacation";\r\nvacation :days 3 "I am away.";\r\n'

check("havespace", client.havespace("rules", len(rules)), client)
check("havespace past the size bound is refused", not client.havespace("rules", script_bytes_max + 1))
check("havespace QUOTA/MAXSIZE", client.errcode == b"QUOTA/MAXSIZE", client)

check("putscript rules", client.putscript("rules", rules), client)
check("putscript away", client.putscript("away", vacation), client)
check("listscripts", client.listscripts() == (None, ["away", "rules"]), client)
check("setactive rules", client.setactive("rules"), client)
check("listscripts active", client.listscripts() == ("rules", ["away"]), client)
got = client.getscript("rules")
check("getscript %r" % got, got is not None and got.replace("\n", "\r\n") + "\r\n" == rules, client)
check("getscript of a missing script", client.getscript("missing") is None)
check("getscript NONEXISTENT", client.errcode == b"NONEXISTENT", client)

check("renamescript", client.renamescript("rules", "filing"), client)
check("listscripts after the rename", client.listscripts() == ("filing", ["away"]), client)
check("renamescript onto a taken name", not client.renamescript("away", "filing"))
check("renamescript ALREADYEXISTS", client.errcode == b"ALREADYEXISTS", client)

check("deletescript of the active one is refused", not client.deletescript("filing"))
check("deletescript ACTIVE", client.errcode == b"ACTIVE", client)
check("deletescript away", client.deletescript("away"), client)
check("deletescript of a missing script", not client.deletescript("away"))
check("deletescript NONEXISTENT", client.errcode == b"NONEXISTENT", client)

check("checkscript", client.checkscript(vacation), client)
check("checkscript of an oversized script fails", not client.checkscript("#" * (script_bytes_max + 10) + "\r\nkeep;\r\n"))
check("checkscript QUOTA/MAXSIZE", client.errcode == b"QUOTA/MAXSIZE", client)
check("putscript of an oversized script fails", not client.putscript("big", "#" * (script_bytes_max + 10) + "\r\nkeep;\r\n"))

# Left for the test to check in the directory: "filing" active, nothing else.
client.logout()
print("ok")
