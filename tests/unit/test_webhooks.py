"""Which webhook URLs are refused, each with why."""

from __future__ import annotations

import pytest

from groups.domain.webhooks import address_forbidden, webhook_url_problem


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:6379/",  # the control plane's own Redis
        "http://localhost:8000/admin/",
        "http://api.localhost/",
        "http://10.0.0.5/hook",  # private networks
        "http://172.16.3.4/hook",
        "http://192.168.1.1/hook",
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata (link-local)
        "http://[::1]:9092/",
        "http://[fd00::1]/",  # unique local IPv6
        "http://[::ffff:127.0.0.1]/",  # loopback written as IPv6
        "http://0.0.0.0/",
        "http://224.0.0.1/",  # multicast
    ],
)
def test_it_refuses_webhooks_to_non_public_addresses(url):
    assert "public addresses only" in webhook_url_problem(url, allow_private=False)


@pytest.mark.parametrize("url", ["ftp://hooks.example/x", "file:///etc/passwd", "https://", "gopher://x", "hooks.example"])
def test_it_refuses_what_is_not_http(url):
    assert webhook_url_problem(url, allow_private=False) == "A webhook is an http:// or https:// URL with a host."


@pytest.mark.parametrize("url", ["https://u:p@hooks.example/x",
                                 "https://u@hooks.example/x",  # a user alone is a credential too
                                 "https://:p@hooks.example/x"])  # and so is a password alone
def test_it_refuses_credentials_in_the_url(url):
    assert webhook_url_problem(url, allow_private=False) == (
        "A webhook URL must not carry a user or password; use a secret path or a header at the receiver."
    )


@pytest.mark.parametrize("url", ["https://hooks.example/gapwatch", "http://93.184.216.34:8080/x",
                                 "https://[2606:4700::1111]/x"])
def test_it_accepts_public_http_webhooks(url):
    assert webhook_url_problem(url, allow_private=False) is None


def test_a_closed_network_may_allow_private_addresses():
    assert webhook_url_problem("http://10.0.0.5/hook", allow_private=True) is None
    assert webhook_url_problem("ftp://10.0.0.5/hook", allow_private=True) is not None


@pytest.mark.parametrize(("address", "forbidden"), [
    ("8.8.8.8", False),
    ("127.0.0.1", True),
    ("fe80::1%eth0", True),  # link-local with its zone, as getaddrinfo gives it
    ("127.0.0.1%lo", True),  # a zone suffix is cut before judging (ipaddress refuses it on IPv4): still loopback
    ("hooks.example", False),  # a name is judged by its addresses when the webhook is sent
])
def test_address_forbidden(address, forbidden):
    assert address_forbidden(address) is forbidden
