"""The SSRF guard sees through address forms (issue 17): shared address space
(100.64.0.0/10, which holds a cloud metadata address) and IPv4 hidden in IPv6
(mapped, 6to4, Teredo, NAT64, IPv4-compatible) are refused like the private
addresses they are; public addresses in the same forms still pass."""

from __future__ import annotations

import pytest

from flowforge.errors import ToolError
from flowforge.tools.network import check_url, is_public_address


@pytest.mark.parametrize("address", [
    "100.64.0.1", "100.100.100.200", "100.127.255.254",          # shared address space
    "::ffff:127.0.0.1", "::ffff:169.254.169.254",                 # IPv4-mapped
    "2002:7f00:1::1", "2002:a9fe:a9fe::1", "2002:0a00:0001::",   # 6to4 of 127/169.254/10
    "2001:0:4136:e378:8000:63bf:80ff:fffe",                      # Teredo
    "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe",                     # NAT64
    "::127.0.0.1", "::10.0.0.1",                                 # IPv4-compatible
    "127.0.0.1", "10.1.2.3", "169.254.169.254", "::1", "fe80::1", "0.0.0.0",
])
def test_private_forms_are_refused(address):
    assert not is_public_address(address)


@pytest.mark.parametrize("address", ["8.8.8.8", "2606:4700::1111", "2002:0808:0808::1",
                                     "100.128.0.1"])
def test_public_forms_pass(address):
    assert is_public_address(address)


@pytest.mark.parametrize("url", ["http://[2002:7f00:1::1]/", "http://100.100.100.200/latest",
                                 "http://[64:ff9b::a9fe:a9fe]/"])
async def test_urls_with_hidden_private_addresses_are_refused(url):
    with pytest.raises(ToolError, match="loopback, private or link-local"):
        await check_url(url)


@pytest.mark.parametrize("url", ["http://\u0080", "http://[x", "http://h:99999/"])
async def test_malformed_urls_are_a_clear_error(url):
    with pytest.raises(ToolError, match="malformed"):
        await check_url(url, allow_private=True)
