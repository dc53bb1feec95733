"""The CLI against a SASL_SSL listener: --command-config with TLS, PLAIN and SCRAM, as users write it."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkapy.testing.certs import make_certs
from tests.cli.conftest import READY, kafkapy


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    certs = make_certs(tmp_path_factory.mktemp("certs"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "serve", "--memory", "--listeners", "SASL_SSL://127.0.0.1:0",
         "--sasl-user", "alice:alice-secret", "--override", f"ssl.keystore.location={certs.server_pem}",
         "--override", "ssl.keystore.type=PEM", "--log-level", "WARNING"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stderr is not None
    address = None
    for line in proc.stderr:
        m = READY.search(line)
        if m:
            address = f"{m.group(1)}:{m.group(2)}"
            break
    if address is None:
        proc.kill()
        proc.wait(10)
        raise AssertionError("the SASL_SSL broker did not start")
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    try:
        yield address, certs.ca
    finally:
        proc.terminate()
        proc.wait(15)


def _props(tmp_path: Path, ca: Path, body: str) -> Path:
    path = tmp_path / "client.properties"
    path.write_text(f"security.protocol=SASL_SSL\nssl.ca.location={ca}\n{body}")
    return path


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_admin_and_clients_with_sasl_over_tls(
    secured: tuple[str, Path], tmp_path: Path, mechanism: str
) -> None:
    address, ca = secured
    props = _props(tmp_path, ca, f"sasl.mechanism={mechanism}\nsasl.username=alice\nsasl.password=alice-secret\n")
    topic = f"sec-{mechanism.lower()}"
    r = kafkapy("topics", "create", topic, "--command-config", str(props), bootstrap=address)
    assert r.code == 0, r.stderr
    r = kafkapy("produce", topic, "--command-config", str(props), stdin="secret\n", bootstrap=address)
    assert r.code == 0, r.stderr
    r = kafkapy("consume", topic, "--from-beginning", "--exit-at-end", "--command-config", str(props),
                bootstrap=address)
    assert r.stdout == "secret\n", r.stderr


def test_java_style_properties_and_bootstrap_from_the_file(secured: tuple[str, Path], tmp_path: Path) -> None:
    address, ca = secured
    props = _props(tmp_path, ca, (
        f"bootstrap.servers={address}\nsasl.mechanism=SCRAM-SHA-256\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="alice" password="alice-secret";\n'
    ))
    r = kafkapy("topics", "create", "sec-java", "--command-config", str(props))
    assert r.code == 0, r.stderr
    r = kafkapy("produce", "sec-java", "--command-config", str(props), stdin="j\n")
    assert r.code == 0, r.stderr
    r = kafkapy("topics", "describe", "sec-java", "--json", "--command-config", str(props))
    assert r.json()[0]["partitions"][0]["log_end_offset"] == 1


def test_wrong_password_and_missing_tls_are_clear(secured: tuple[str, Path], tmp_path: Path) -> None:
    address, ca = secured
    props = _props(tmp_path, ca, "sasl.mechanism=SCRAM-SHA-512\nsasl.username=alice\nsasl.password=nope\n")
    r = kafkapy("topics", "list", "--command-config", str(props), bootstrap=address)
    assert r.code == 1
    assert "SASL_AUTHENTICATION_FAILED (error code 58)" in r.stderr
    assert "check the user and password in --command-config" in r.stderr
    untrusted = tmp_path / "untrusted.properties"
    untrusted.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=alice\nsasl.password=alice-secret\n")
    r = kafkapy("topics", "list", "--command-config", str(untrusted), bootstrap=address)
    assert r.code == 1
    assert "TLS to" in r.stderr
    assert "CERTIFICATE_VERIFY_FAILED" in r.stderr
