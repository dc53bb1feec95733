"""Throw-away TLS certificates for tests, made with the openssl command line tool.

Why openssl and not a Python library: it is on every machine the tests run on (CI installs the
clients that need it anyway), needs no new dependency, and the files it writes are the PEM files
a user would configure. Keys are EC P-256 so making a set takes milliseconds; certificates are
valid for one day for `localhost` and 127.0.0.1.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CertFiles", "make_certs"]


@dataclass(frozen=True, slots=True)
class CertFiles:
    ca: Path  # the CA certificate clients trust
    server_cert: Path
    server_key: Path
    server_pem: Path  # certificate chain and key in one file (ssl.keystore.location)
    client_cert: Path  # signed by the same CA, for ssl.client.auth tests
    client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def _signed(directory: Path, name: str, cn: str, san: str | None) -> None:
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}",
        cwd=directory,
    )  # fmt: skip
    ext = directory / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", f"{name}.pem", "-days", "1", "-extfile", ext.name,
        cwd=directory,
    )  # fmt: skip


def make_certs(directory: Path) -> CertFiles:
    """A CA, a server certificate for localhost/127.0.0.1 and a client certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=kafkapy test CA",
        cwd=directory,
    )  # fmt: skip
    _signed(directory, "server", "localhost", "DNS:localhost,IP:127.0.0.1")
    _signed(directory, "client", "kafkapy-test-client", None)
    combined = directory / "server-keystore.pem"
    combined.write_text(
        (directory / "server.pem").read_text() + (directory / "server.key").read_text()
    )
    return CertFiles(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        server_pem=combined,
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
    )
