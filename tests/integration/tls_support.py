"""A throwaway certificate authority for TLS tests: a CA, a server certificate for
127.0.0.1 and localhost, and a client certificate, made with the `openssl` command (the
venv has no `cryptography`). EC P-256 keys: quick to make, and accepted by nats-server,
secantusd-py, nats-py and pymongo alike. Extensions are written out (CA constraints,
key usages, key identifiers) so a strict verifier accepts the chain too."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None,
                                   reason="needs the openssl command")

EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
LEAF = ("basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n")


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    client_pem: Path
    """Client certificate and key in one file, as pymongo's tlsCertificateKeyFile wants."""


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, timeout=60)


def _leaf(folder: Path, name: str, extensions: str, ca: Path, ca_key: Path) -> tuple[Path, Path]:
    key, csr, cert, ext = (folder / f"{name}.{x}" for x in ("key", "csr", "pem", "ext"))
    ext.write_text(LEAF + extensions)
    _openssl("req", *EC_KEY, "-keyout", key, "-out", csr, "-subj", f"/CN=ledger-test-{name}")
    _openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
             "-out", cert, "-days", "1", "-extfile", ext)
    return cert, key


def make_certificates(folder: Path) -> Certificates:
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    _openssl("req", "-x509", *EC_KEY, "-keyout", ca_key, "-out", ca, "-days", "1",
             "-subj", "/CN=ledger-test-ca",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    server_cert, server_key = _leaf(folder, "server", "extendedKeyUsage=serverAuth\n"
                                    "subjectAltName=IP:127.0.0.1,DNS:localhost\n", ca, ca_key)
    client_cert, client_key = _leaf(folder, "client", "extendedKeyUsage=clientAuth\n",
                                    ca, ca_key)
    client_pem = folder / "client-with-key.pem"
    client_pem.write_text(client_cert.read_text() + client_key.read_text())
    return Certificates(ca, server_cert, server_key, client_cert, client_key, client_pem)
