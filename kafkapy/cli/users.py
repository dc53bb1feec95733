"""`kafkapy users create|list|delete`: SCRAM users (kafka-configs.sh --entity-type users).

What is sent: AlterUserScramCredentials / DescribeUserScramCredentials, as Kafka's admin client
sends them. The password never leaves this process: the CLI picks a random salt and sends the
salted password (PBKDF2 with `--iterations`), from which the controller derives the keys it
stores; `create` replaces a user's credential for that mechanism if it has one.

Password: `--password`, else asked for on a terminal (twice, hidden), else the first line of
stdin (`echo "$PW" | kafkapy users create alice`), so it need not appear in `ps` or the shell's
history.

Mechanisms: `--mechanism` may be repeated; without it `create` makes both SCRAM-SHA-256 and
SCRAM-SHA-512 credentials and `delete` removes every one the user has. Kafka refuses one user
twice in a request (DUPLICATE_RESOURCE), so each mechanism is its own request.

Exit codes: 0 ok, 1 a refusal from the cluster (named with its Kafka error code), 2 a usage
error. Users configured in a broker's own config (`kafkapy.sasl.users`, JAAS `user_<name>`) are
listed but can only be changed there.
"""

from __future__ import annotations

import hashlib
import secrets
import sys
from typing import Any

import click

from kafkapy.cli.common import KAFKA_COMPATIBLE, ClientSettings, CliError, Output, client_options
from kafkapy.cli.wire import Admin
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafkapy.protocol.sasl import (
    SCRAM_MAX_ITERATIONS,
    SCRAM_MECHANISM_TYPES,
    SCRAM_MECHANISMS,
    SCRAM_MIN_ITERATIONS,
)

__all__ = ["alter_scram", "describe_scram", "users"]

_TYPES = {name: t for t, name in SCRAM_MECHANISM_TYPES.items()}
_HINTS: dict[ErrorCode, str] = {
    ErrorCode.RESOURCE_NOT_FOUND: "check the name with `kafkapy users list`",
    ErrorCode.UNACCEPTABLE_CREDENTIAL: f"use a name and {SCRAM_MIN_ITERATIONS}..{SCRAM_MAX_ITERATIONS} iterations",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "altering users needs ALTER on the cluster",
}


def _check(code: int, what: str, message: str | None) -> None:
    if code != ErrorCode.NONE:
        hint = next((h for c, h in _HINTS.items() if c == code), None)
        raise CliError(f"{what}{f' ({message})' if message else ''}", code, hint)


def describe_scram(admin: Admin, names: list[str] | None) -> list[dict[str, Any]]:
    """[{user, credentials: [{mechanism, iterations}]}] of the named users (None: all)."""
    request = DescribeUserScramCredentialsRequest(
        users=None if not names else [DescribeUserScramCredentialsRequest.UserName(name=n) for n in names]
    )
    response: DescribeUserScramCredentialsResponse = admin.call(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request
    )
    _check(response.error_code, "describing users", response.error_message)
    out = []
    for r in response.results:
        _check(r.error_code, f"user {r.user!r}", r.error_message)
        out.append({
            "user": r.user,
            "credentials": [
                {"mechanism": SCRAM_MECHANISM_TYPES.get(c.mechanism, str(c.mechanism)),
                 "iterations": c.iterations}
                for c in r.credential_infos
            ],
        })  # fmt: skip
    return out


def alter_scram(
    admin: Admin,
    user: str,
    mechanism: str,
    *,
    password: str | None = None,
    iterations: int = SCRAM_MIN_ITERATIONS,
) -> None:
    """Create or replace (`password` given) or delete one SCRAM credential of `user`."""
    request = AlterUserScramCredentialsRequest()
    if password is None:
        request.deletions = [
            AlterUserScramCredentialsRequest.ScramCredentialDeletion(
                name=user, mechanism=_TYPES[mechanism]
            )
        ]
    else:
        salt = secrets.token_bytes(32)
        salted = hashlib.pbkdf2_hmac(
            SCRAM_MECHANISMS[mechanism], password.encode("utf-8"), salt, iterations
        )
        request.upsertions = [
            AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                name=user, mechanism=_TYPES[mechanism], iterations=iterations, salt=salt,
                salted_password=salted,
            )
        ]  # fmt: skip
    response: AlterUserScramCredentialsResponse = admin.call(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request
    )
    for r in response.results:
        verb = "creating" if password is not None else "deleting"
        _check(r.error_code, f"{verb} the {mechanism} credential of {r.user!r}", r.error_message)


def _read_password() -> str:
    if sys.stdin.isatty():
        value: str = click.prompt("Password", hide_input=True, confirmation_prompt=True)
        return value
    line = sys.stdin.readline()
    if not line:
        raise click.UsageError("no password: give --password, or one line on stdin")
    return line.rstrip("\r\n")


_MECHANISM = click.Choice(list(SCRAM_MECHANISMS), case_sensitive=False)


@click.group(help=f"Create, list or delete SCRAM users (kafka-configs.sh --entity-type users). {KAFKA_COMPATIBLE}")
def users() -> None:
    pass


@users.command()
@click.argument("name")
@click.option("--mechanism", "mechanisms", type=_MECHANISM, multiple=True,
              help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default: both)")
@click.option("--iterations", type=click.IntRange(min=1), default=SCRAM_MIN_ITERATIONS, show_default=True,
              help=f"PBKDF2 iterations (Kafka takes {SCRAM_MIN_ITERATIONS}..{SCRAM_MAX_ITERATIONS})")
@click.option("--password", help="the password (else asked for on a terminal, or read from stdin)")
@client_options
def create(
    settings: ClientSettings, name: str, mechanisms: tuple[str, ...], iterations: int, password: str | None
) -> int:
    """Create a SCRAM user, or replace its password."""
    chosen = [m.upper() for m in mechanisms] or list(SCRAM_MECHANISMS)
    secret = password if password is not None else _read_password()
    with Admin(settings) as admin:
        for mechanism in dict.fromkeys(chosen):
            alter_scram(admin, name, mechanism, password=secret, iterations=iterations)
    out = Output(settings)
    if settings.json:
        out.emit({"user": name, "mechanisms": list(dict.fromkeys(chosen)), "iterations": iterations})
    else:
        out.line(f"created {', '.join(dict.fromkeys(chosen))} credentials of user {name}")
    return 0


@users.command(name="list")
@click.argument("names", nargs=-1)
@client_options
def list_users(settings: ClientSettings, names: tuple[str, ...]) -> int:
    """List SCRAM users and their mechanisms (all, or the named ones)."""
    with Admin(settings) as admin:
        found = describe_scram(admin, list(names) or None)
    out = Output(settings)
    if settings.json:
        out.emit(found)
    else:
        rows = [(u["user"], c["mechanism"], c["iterations"]) for u in found for c in u["credentials"]]
        out.table(["USER", "MECHANISM", "ITERATIONS"], rows)
    return 0


@users.command()
@click.argument("name")
@click.option("--mechanism", "mechanisms", type=_MECHANISM, multiple=True,
              help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default: every one the user has)")
@client_options
def delete(settings: ClientSettings, name: str, mechanisms: tuple[str, ...]) -> int:
    """Delete a SCRAM user's credentials."""
    with Admin(settings) as admin:
        chosen = [m.upper() for m in mechanisms]
        if not chosen:
            (found,) = describe_scram(admin, [name])
            chosen = [c["mechanism"] for c in found["credentials"]]
        for mechanism in dict.fromkeys(chosen):
            alter_scram(admin, name, mechanism)
    out = Output(settings)
    if settings.json:
        out.emit({"user": name, "deleted": list(dict.fromkeys(chosen))})
    else:
        out.line(f"deleted {', '.join(dict.fromkeys(chosen))} credentials of user {name}")
    return 0
