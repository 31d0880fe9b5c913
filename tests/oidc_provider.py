"""A minimal OpenID Connect provider on loopback for tests: discovery, an authorize endpoint that signs in one
configured user at once, a token endpoint issuing an RS256-signed id_token, and its JWKS."""

from __future__ import annotations

import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from joserfc import jwt
from joserfc.jwk import RSAKey


class Provider:
    """The provider's state: its key, the client it knows, the user it signs in, and codes issued."""

    def __init__(self, client_id: str, client_secret: str, claims: dict[str, Any]):
        self.client_id, self.client_secret, self.claims = client_id, client_secret, claims
        self.key = RSAKey.generate_key(2048, parameters={"kid": "test-key"})
        self.codes: dict[str, str] = {}  # code -> nonce of its authorize request
        self.tokens_issued = 0
        self.base = ""

    def metadata(self) -> dict[str, Any]:
        return {"issuer": self.base, "authorization_endpoint": f"{self.base}/authorize",
                "token_endpoint": f"{self.base}/token", "jwks_uri": f"{self.base}/jwks",
                "response_types_supported": ["code"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"]}

    def id_token(self, nonce: str) -> str:
        now = int(time.time())
        claims = {"iss": self.base, "aud": self.client_id, "sub": "user-1", "iat": now, "exp": now + 600,
                  "nonce": nonce, **self.claims}
        return jwt.encode({"alg": "RS256", "kid": "test-key"}, claims, self.key)


def _handler(p: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _json(self, body: dict[str, Any], status: int = 200) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(url.query))
            if url.path == "/.well-known/openid-configuration":
                self._json(p.metadata())
            elif url.path == "/jwks":
                self._json({"keys": [p.key.as_dict(private=False)]})
            elif url.path == "/authorize" and query.get("client_id") == p.client_id:
                code = secrets.token_urlsafe(16)
                p.codes[code] = query.get("nonce", "")
                back = urllib.parse.urlencode({"code": code, "state": query.get("state", "")})
                self.send_response(302)
                self.send_header("Location", f"{query['redirect_uri']}?{back}")
                self.end_headers()
            else:
                self._json({"error": "not_found"}, 404)

        def do_POST(self) -> None:
            form = dict(urllib.parse.parse_qsl(self.rfile.read(int(self.headers["Content-Length"])).decode()))
            nonce = p.codes.pop(form.get("code", ""), None)
            if self.path != "/token" or nonce is None:
                self._json({"error": "invalid_grant"}, 400)
                return
            p.tokens_issued += 1
            self._json({"access_token": secrets.token_urlsafe(16), "token_type": "Bearer", "expires_in": 600,
                        "id_token": p.id_token(nonce)})

    return Handler


@contextmanager
def serve(client_id: str, client_secret: str, claims: dict[str, Any]) -> Iterator[Provider]:
    """Run a provider on a free loopback port until the block ends."""
    p = Provider(client_id, client_secret, claims)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(p))
    p.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield p
    finally:
        server.shutdown()
        server.server_close()
