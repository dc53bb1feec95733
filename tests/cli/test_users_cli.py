"""`kafkapy users create|list|delete` against a real broker subprocess, as a user runs them: a
created user logs in over SASL (SCRAM), a deleted one no longer does, refusals name Kafka's code."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import START_TIMEOUT_S, kafkapy

READY = re.compile(r"kafkapy ready: listening on 127\.0\.0\.1:(\d+), 127\.0\.0\.1:(\d+)")


@pytest.fixture(scope="module")
def ports() -> Iterator[tuple[str, str]]:
    """(PLAINTEXT address, SASL_PLAINTEXT address) of an in-memory broker with one configured
    user, admin."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "serve", "--memory",
         "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
         "--sasl-user", "admin:admin-pw", "--log-level", "WARNING"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    found = None
    timer = threading.Timer(START_TIMEOUT_S, proc.kill)
    timer.start()
    for line in proc.stderr:
        found = READY.search(line)
        if found:
            break
    timer.cancel()
    if found is None:
        proc.kill()
        proc.wait(10)
        raise AssertionError("the broker did not start")
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    try:
        yield f"127.0.0.1:{found.group(1)}", f"127.0.0.1:{found.group(2)}"
    finally:
        proc.terminate()
        proc.wait(15)


def _login(tmp_path: Path, sasl: str, mechanism: str, user: str, password: str) -> int:
    """Exit code of `kafkapy topics list` over SASL as `user`."""
    props = tmp_path / f"{user}-{mechanism}.properties"
    props.write_text(
        f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
        f"sasl.username={user}\nsasl.password={password}\n"
    )
    return kafkapy("topics", "list", "--command-config", str(props), bootstrap=sasl).code


def _listed(plain: str, *names: str) -> dict[str, list[tuple[str, int]]]:
    r = kafkapy("users", "list", *names, "--json", bootstrap=plain)
    assert r.code == 0, r.stderr
    return {u["user"]: [(c["mechanism"], c["iterations"]) for c in u["credentials"]] for u in r.json()}


def test_create_list_login_delete(ports: tuple[str, str], tmp_path: Path) -> None:
    plain, sasl = ports
    assert _listed(plain) == {"admin": [("SCRAM-SHA-256", 4096), ("SCRAM-SHA-512", 4096)]}
    r = kafkapy("users", "create", "hana", "--mechanism", "SCRAM-SHA-512", "--iterations", "8192",
                "--password", "hana-pw", bootstrap=plain)  # fmt: skip
    assert r.code == 0, r.stderr
    assert "created SCRAM-SHA-512 credentials of user hana" in r.stdout
    assert _listed(plain, "hana") == {"hana": [("SCRAM-SHA-512", 8192)]}
    assert _login(tmp_path, sasl, "SCRAM-SHA-512", "hana", "hana-pw") == 0
    assert _login(tmp_path, sasl, "SCRAM-SHA-512", "hana", "wrong") == 1
    assert _login(tmp_path, sasl, "SCRAM-SHA-256", "hana", "hana-pw") == 1

    table = kafkapy("users", "list", bootstrap=plain)
    assert table.code == 0, table.stderr
    rows = [line.split() for line in table.stdout.splitlines()]
    assert ["hana", "SCRAM-SHA-512", "8192"] in rows
    assert ["admin", "SCRAM-SHA-256", "4096"] in rows

    r = kafkapy("users", "delete", "hana", bootstrap=plain)
    assert r.code == 0, r.stderr
    assert "hana" not in _listed(plain)
    assert _login(tmp_path, sasl, "SCRAM-SHA-512", "hana", "hana-pw") == 1


def test_password_from_stdin_makes_both_mechanisms(ports: tuple[str, str], tmp_path: Path) -> None:
    plain, sasl = ports
    r = kafkapy("users", "create", "ivan", "--json", bootstrap=plain, stdin="ivan-pw\n")
    assert r.code == 0, r.stderr
    assert r.json() == {"user": "ivan", "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"],
                        "iterations": 4096}  # fmt: skip
    assert _login(tmp_path, sasl, "SCRAM-SHA-256", "ivan", "ivan-pw") == 0
    assert _login(tmp_path, sasl, "SCRAM-SHA-512", "ivan", "ivan-pw") == 0
    r = kafkapy("users", "delete", "ivan", "--mechanism", "SCRAM-SHA-256", "--json", bootstrap=plain)
    assert r.code == 0, r.stderr
    assert r.json() == {"user": "ivan", "deleted": ["SCRAM-SHA-256"]}
    assert _listed(plain, "ivan") == {"ivan": [("SCRAM-SHA-512", 4096)]}


def test_refusals_name_the_kafka_code(ports: tuple[str, str]) -> None:
    plain, _ = ports
    r = kafkapy("users", "create", "jo", "--iterations", "100", "--password", "x", bootstrap=plain)
    assert r.code == 1
    assert "UNACCEPTABLE_CREDENTIAL (error code 93)" in r.stderr
    r = kafkapy("users", "delete", "nobody", "--mechanism", "SCRAM-SHA-256", bootstrap=plain)
    assert r.code == 1
    assert "RESOURCE_NOT_FOUND" in r.stderr
    assert "kafkapy users list" in r.stderr
    r = kafkapy("users", "list", "nobody", bootstrap=plain)
    assert r.code == 1
    assert "RESOURCE_NOT_FOUND" in r.stderr
    r = kafkapy("users", "delete", "admin", bootstrap=plain)  # configured in the broker's config
    assert r.code == 1
    assert "configured user" in r.stderr
    r = kafkapy("users", "create", "jo", bootstrap=plain, stdin="")
    assert r.code == 2
    assert "no password" in r.stderr
    r = kafkapy("users", "create", "jo", "--mechanism", "SCRAM-SHA-1", "--password", "x", bootstrap=plain)
    assert r.code == 2
    assert "Traceback" not in r.stderr
