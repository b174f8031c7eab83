"""A TLS-ALPN-01 (RFC 8737) order with Debian's python3-acme: argv DIRECTORY NAME ADDRESS OUT.

Run by tests/acme2certifier.rs with REQUESTS_CA_BUNDLE naming the ACME server's CA. Answers
the challenge on ADDRESS:443 and writes the certificate chain to OUT.
"""
import datetime
import hashlib
import sys
import threading

import josepy as jose
from acme import challenges, client, crypto_util, messages, standalone
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

# Debian 12's python3-acme (2.1.0) makes the challenge certificate of an RFC 8737 draft: the
# extension under the draft's OID 1.3.6.1.5.5.7.1.30.1 holding the bare digest. RFC 8737 3:
# id-pe-acmeIdentifier is 1.3.6.1.5.5.7.1.31 and its value the DER OCTET STRING of the digest.
challenges.TLSALPN01Response.ID_PE_ACME_IDENTIFIER_V1 = b"1.3.6.1.5.5.7.1.31"
challenges.TLSALPN01Response.h = property(
    lambda self: b"\x04\x20" + hashlib.sha256(self.key_authorization.encode("utf-8")).digest()
)

directory_url, name, address, out = sys.argv[1:5]
account_key = jose.JWKRSA(key=rsa.generate_private_key(public_exponent=65537, key_size=2048))
net = client.ClientNetwork(account_key, user_agent="test-peers-alpn")
acme = client.ClientV2(client.ClientV2.get_directory(directory_url, net), net)
acme.new_account(messages.NewRegistration.from_data(terms_of_service_agreed=True))

cert_key = ec.generate_private_key(ec.SECP256R1()).private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
order = acme.new_order(crypto_util.make_csr(cert_key, [name]))
(authz,) = order.authorizations
challenge = next(c for c in authz.body.challenges if isinstance(c.chall, challenges.TLSALPN01))
response, (cert, key) = challenge.response_and_validation(account_key, domain=name)
server = standalone.TLSALPN01Server(
    (address, 443), certs=[(key, cert)], challenge_certs={name.encode(): (key, cert)})
threading.Thread(target=server.serve_forever, daemon=True).start()
acme.answer_challenge(challenge, response)
deadline = datetime.datetime.now() + datetime.timedelta(seconds=60)
order = acme.poll_and_finalize(order, deadline)
server.shutdown()
with open(out, "w") as f:
    f.write(order.fullchain_pem)
