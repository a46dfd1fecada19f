"""The HTTPS clients flowforge makes share one verified TLS context, built
the way httpx builds its default, and again when its variables change."""

from __future__ import annotations

import ssl

import certifi

from flowforge.tls import verified_context


def test_one_context_checks_certificates_and_host_names(monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    context = verified_context()
    assert context is verified_context()             # built once, not per client
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0  # certifi's bundle is loaded


def test_ssl_cert_file_is_honoured_as_httpx_would(monkeypatch, tmp_path):
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    default = verified_context()
    one_ca = tmp_path / "ca.pem"
    bundle = open(certifi.where(), encoding="ascii").read()
    one_ca.write_text(bundle[:bundle.index("-----END CERTIFICATE-----") + 26])
    monkeypatch.setenv("SSL_CERT_FILE", str(one_ca))
    own = verified_context()
    assert own is not default and own.cert_store_stats()["x509_ca"] == 1
    monkeypatch.delenv("SSL_CERT_FILE")
    assert verified_context() is default
