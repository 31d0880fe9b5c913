"""The outbound HTTP client (collectors/outbound.py) and every caller of it, against hostile loopback servers
that record what reached them: a credential never follows a redirect to another origin, a redirect never
turns a POST into a GET, a trickling answer meets one overall deadline, and a body is capped."""

from __future__ import annotations

import gzip
import http.client
import re
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.alertmanager import Alertmanager, AlertmanagerError, AmAuth
from collectors.exceptions import CollectorError
from collectors.outbound import Proxy, RedirectRefused, bypassed, proxy_for, redirect_target
from collectors.promhttp import ChunkFailed, PromAuth, PromClient, RetryPolicy
from collectors.scrape import scrape
from tests.cli import run
from tests.loopback import Endless, ForwardProxy, Recording, Trickler
from tests.proxies import TlsProxy, self_signed

TOKEN = "s3cret-scrape-token"
ENV = {"HETPOOL_SCRAPE_TOKEN": TOKEN}


@pytest.fixture
def here() -> Iterator[Recording]:
    server = Recording("127.0.0.1")
    yield server
    server.close()


@pytest.fixture
def elsewhere() -> Iterator[Recording]:
    server = Recording("127.0.0.2")  # another loopback address: another host as far as an origin goes
    yield server
    server.close()


def test_the_origin_rule_as_a_table() -> None:
    follow = [
        ("http://h:9100/metrics", "GET", 302, "/real", "http://h:9100/real"),
        ("http://h/metrics", "GET", 301, "http://h:80/x", "http://h:80/x"),  # the default port is the same port
        ("http://H:1/a", "GET", 308, "http://h:1/b", "http://h:1/b"),  # host names are not case-sensitive
        ("http://h:1/a", "POST", 307, "/b", "http://h:1/b"),  # 307 and 308 keep the method and body
        ("http://h:1/a", "HEAD", 303, "/b", "http://h:1/b"),
    ]
    for url, method, status, location, target in follow:
        assert redirect_target(url, method, status, location) == target
    refuse = [
        ("http://h:1/a", "GET", 302, "http://evil:1/a", "another origin"),
        ("http://h:1/a", "GET", 302, "http://h:2/a", "another origin"),
        ("http://h:1/a", "GET", 302, "https://h:1/a", "another origin"),
        ("http://h:1/a", "GET", 302, "//evil/a", "another origin"),
        ("http://h:1/a", "POST", 302, "/b", "would turn it into a GET"),
        ("http://h:1/a", "POST", 303, "/b", "would turn it into a GET"),
        ("http://h:1/a", "GET", 302, None, "without a Location"),
    ]
    for url, method, status, location, why in refuse:
        with pytest.raises(RedirectRefused, match=why):
            redirect_target(url, method, status, location)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_scrape_token_never_reaches_another_host(here: Recording, elsewhere: Recording, status: int) -> None:
    elsewhere.routes["/metrics"] = (200, {}, b"stolen 1\n")
    here.redirect("/metrics", f"{elsewhere.origin}/metrics", status)
    with pytest.raises(CollectorError, match=rf"cannot scrape {here.origin}/metrics: redirected to "
                                             rf"http://127\.0\.0\.2:\d+, another origin"):
        b"".join(scrape(f"{here.origin}/metrics", env=ENV))
    assert elsewhere.seen == []
    assert [s.headers.get("Authorization") for s in here.seen] == [f"Bearer {TOKEN}"]


def test_a_redirect_on_the_same_origin_is_followed_with_the_token(here: Recording) -> None:
    here.routes["/real"] = (200, {"Content-Type": "text/plain"}, b"up 1\n")
    here.redirect("/metrics", "/real")
    assert b"".join(scrape(f"{here.origin}/metrics", env=ENV)) == b"up 1\n"
    assert [(s.path, s.headers.get("Authorization")) for s in here.seen] == [
        ("/metrics", f"Bearer {TOKEN}"), ("/real", f"Bearer {TOKEN}")]


def test_a_redirect_loop_ends(here: Recording) -> None:
    here.redirect("/metrics", "/metrics")
    with pytest.raises(CollectorError, match="redirected more than 5 times"):
        b"".join(scrape(f"{here.origin}/metrics"))
    assert len(here.seen) == 6


def test_alertmanager_posts_are_never_turned_into_gets_nor_sent_elsewhere(here: Recording,
                                                                           elsewhere: Recording) -> None:
    here.redirect("/api/v2/alerts", "/moved/api/v2/alerts", 302)
    client = Alertmanager(here.origin, AmAuth(token="am-token"))
    with pytest.raises(AlertmanagerError, match=r"answered POST with HTTP 302, which would turn it into a GET"):
        client.post_alerts([{"labels": {"alertname": "x"}}])
    assert [s.method for s in here.seen] == ["POST"]
    here.redirect("/api/v2/alerts", f"{elsewhere.origin}/api/v2/alerts", 307)
    with pytest.raises(AlertmanagerError, match="another origin"):
        client.post_alerts([{"labels": {"alertname": "x"}}])
    assert elsewhere.seen == []
    # a 307 on the same origin keeps the method, the body and the credential: what Alertmanager accepted counts
    here.redirect("/api/v2/alerts", "/moved/api/v2/alerts", 307)
    here.routes["/moved/api/v2/alerts"] = (200, {}, b"")
    assert client.post_alerts([{"labels": {"alertname": "x"}}, {"labels": {"alertname": "y"}}]) == 2
    moved = here.seen[-1]
    assert (moved.method, moved.path, moved.headers["Authorization"]) == ("POST", "/moved/api/v2/alerts",
                                                                           "Bearer am-token")
    assert b'"alertname": "y"' in moved.body


def test_alerts_send_to_a_redirecting_url_is_one_line_and_says_nothing_was_sent(
        capsys: pytest.CaptureFixture[str], demo_db: Path, here: Recording, elsewhere: Recording,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETPOOL_ALERTMANAGER_TOKEN", "am-token")
    here.redirect("/api/v2/alerts", f"{elsewhere.origin}/api/v2/alerts", 302)
    code, out, err = run(capsys, "--db", str(demo_db), "alerts", "--send", here.origin)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "another origin" in err, err
    assert "sent " not in out and "am-token" not in err
    assert elsewhere.seen == []


def test_the_prometheus_pull_refuses_a_redirect_to_another_host(here: Recording, elsewhere: Recording) -> None:
    here.redirect("/api/v1/query", f"{elsewhere.origin}/api/v1/query")
    client = PromClient(here.origin, PromAuth(user="ops", password="pw"), retry=RetryPolicy(attempts=2),
                        sleep=lambda _s: None)
    with pytest.raises(ChunkFailed, match="another origin"):
        client.range_vector("up", 0, 60_000)
    assert elsewhere.seen == [] and len(here.seen) == 2


def test_a_trickling_answer_meets_one_overall_deadline() -> None:
    # headers, then a byte every 0.2 s: every single read is quick, the whole answer never comes in time
    body = b"x 1\n" * 100
    slow = Trickler(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body), body, every_s=0.2)
    headers = Trickler(b"", b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n", every_s=0.2)
    try:
        for server in (slow, headers):
            began = time.monotonic()
            with pytest.raises(CollectorError, match=r"no whole answer within 1 s"):
                b"".join(scrape(server.url, timeout=1.0))
            assert time.monotonic() - began < 10  # not the 40 s and more the trickle would take
    finally:
        slow.close()
        headers.close()


def test_an_endless_body_is_refused_at_its_cap() -> None:
    endless = Endless()
    try:
        with pytest.raises(CollectorError, match=r"answered more than 1 MiB; hetpool refuses a larger body"):
            b"".join(scrape(endless.url, max_bytes=1 << 20))
        assert endless.sent < 64 << 20
    finally:
        endless.close()


def test_a_gzip_bomb_is_refused_as_it_inflates(here: Recording) -> None:
    here.routes["/metrics"] = (200, {"Content-Encoding": "gzip"}, gzip.compress(b"\0" * (64 << 20)))
    assert len(here.routes["/metrics"][2]) < 1 << 20
    with pytest.raises(CollectorError, match=r"answered more than 1 MiB"):
        b"".join(scrape(f"{here.origin}/metrics", max_bytes=1 << 20))
    here.routes["/metrics"] = (200, {"Content-Encoding": "gzip"}, gzip.compress(b"a 1\n" * 1000))
    assert b"".join(scrape(f"{here.origin}/metrics")) == b"a 1\n" * 1000


def test_an_abort_ends_a_scrape_waiting_on_a_trickle_at_once() -> None:
    slow = Trickler(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", b"x" * 1000, every_s=0.5)
    stop_at = time.monotonic() + 0.5
    try:
        began = time.monotonic()
        with pytest.raises(CollectorError, match="stopped waiting for the answer: the service is stopping"):
            b"".join(scrape(slow.url, timeout=30.0, abort=lambda: time.monotonic() > stop_at))
        assert time.monotonic() - began < 10  # not the 30 s deadline
    finally:
        slow.close()


# -- proxies ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("host", "port", "no_proxy", "covered"), [
    ("a.example.com", 80, "example.com", True),       # a name covers its subdomains
    ("a.example.com", 80, ".example.com", True),
    ("example.com", 80, ".example.com", True),        # with or without the leading dot
    ("badexample.com", 80, "example.com", False),     # a suffix of the name is not a subdomain
    ("10.0.0.5", 9100, "10.0.0.5:9100", True),
    ("10.0.0.5", 9400, "10.0.0.5:9100", False),       # host:port covers that port only
    ("::1", 9100, "[::1]", True),
    ("exporter", 9100, " other , exporter ", True),
    ("exporter", 9100, "*", True),
    ("exporter", 9100, "", False),
])
def test_no_proxy_as_a_table(host: str, port: int, no_proxy: str, covered: bool) -> None:
    assert bypassed(host, port, no_proxy) is covered


def test_the_proxy_settings_are_read_as_curl_reads_them() -> None:
    env = {"http_proxy": "http://p:3128", "HTTP_PROXY": "http://q:1", "ALL_PROXY": "r:8080"}
    assert proxy_for("http", "exporter", 9100, env) == Proxy("p", 3128)          # lower case first
    assert proxy_for("https", "exporter", 443, env) == Proxy("r", 8080)          # all_proxy, scheme assumed
    assert proxy_for("http", "exporter", 9100, {**env, "no_proxy": "exporter"}) is None
    assert proxy_for("http", "exporter", 9100, {}) is None
    with_creds = proxy_for("http", "x", 80, {"http_proxy": "http://ops:p%40ss@p:3128"})
    assert with_creds == Proxy("p", 3128, "ops", "p@ss") and "p@ss" not in repr(with_creds)
    assert with_creds.headers() == {"Proxy-Authorization": "Basic b3BzOnBAc3M="}  # base64 of ops:p@ss
    for bad in ("https://p:443", "socks5://ops:pw@p:1080", "http://p:99999"):
        with pytest.raises(CollectorError, match=r"cannot use the proxy .*expected http://host:port") as exc:
            proxy_for("http", "x", 80, {"http_proxy": bad})
        assert "pw" not in str(exc.value)


def test_a_scrape_goes_through_the_proxy_the_environment_names(here: Recording) -> None:
    here.routes["/metrics"] = (200, {"Content-Type": "text/plain"}, b"up 1\n")
    proxy = ForwardProxy(wants="Basic b3BzOnB3")  # ops:pw
    try:
        env = {**ENV, "http_proxy": proxy.origin.replace("http://", "http://ops:pw@")}
        assert b"".join(scrape(f"{here.origin}/metrics", env=env)) == b"up 1\n"
        (asked,) = proxy.seen
        assert (asked.method, asked.path) == ("GET", f"{here.origin}/metrics")  # the absolute form
        (got,) = here.seen
        assert got.headers["Authorization"] == f"Bearer {TOKEN}" and "Proxy-Authorization" not in got.headers
        # no_proxy covers the exporter: straight to it
        assert b"".join(scrape(f"{here.origin}/metrics", env={**env, "NO_PROXY": "127.0.0.1"})) == b"up 1\n"
        assert len(proxy.seen) == 1 and len(here.seen) == 2
        # wrong credentials: the proxy's answer, and never the password
        with pytest.raises(CollectorError, match="HTTP 407") as exc:
            b"".join(scrape(f"{here.origin}/metrics", env={**env, "http_proxy": proxy.origin.replace(
                "http://", "http://ops:wrong@")}))
        assert "wrong" not in str(exc.value)
    finally:
        proxy.close()


def test_an_https_scrape_is_tunnelled_and_the_proxy_sees_no_credentials(here: Recording, tmp_path: Path) -> None:
    here.routes["/metrics"] = (200, {"Content-Type": "text/plain"}, b"up 1\n")
    cert, key = self_signed(tmp_path)
    trusted = ssl.create_default_context(cafile=str(cert))

    def connect(scheme: str, host: str, port: int, timeout_s: float) -> http.client.HTTPConnection:
        if scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=timeout_s, context=trusted)
        return http.client.HTTPConnection(host, port, timeout=timeout_s)

    proxy = ForwardProxy(wants="Basic b3BzOnB3")
    with TlsProxy(here.origin, tls=(cert, key)) as tls:
        try:
            target = f"{tls.url}/metrics"
            env = {**ENV, "https_proxy": proxy.origin.replace("http://", "http://ops:pw@")}
            assert b"".join(scrape(target, env=env, connect=connect)) == b"up 1\n"
            (asked,) = proxy.seen
            assert (asked.method, asked.path) == ("CONNECT", tls.url.removeprefix("https://"))
            assert "Authorization" not in asked.headers  # the bearer token went inside the tunnel
            assert asked.headers["Proxy-Authorization"] == "Basic b3BzOnB3" and here.seen[-1].path == "/metrics"
            bad = {**env, "https_proxy": proxy.origin.replace("http://", "http://ops:wrong@")}
            with pytest.raises(CollectorError, match=r"407 Proxy Authentication Required \(through the proxy "
                                                     rf"{re.escape(proxy.origin)}\)") as exc:
                b"".join(scrape(target, env=bad, connect=connect))
            assert "wrong" not in str(exc.value)
        finally:
            proxy.close()
