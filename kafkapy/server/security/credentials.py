"""The SASL user database of one broker: PLAIN passwords and SCRAM credentials.

Where users come from (a dev broker, so the simplest ways a developer can type them):
- `kafkapy.sasl.users=alice:alice-secret,bob:bob-secret` (properties file, `--override`,
  `KAFKAPY_SASL_USERS`, or `kafkapy serve --sasl-user alice:alice-secret`): each user may log in
  with PLAIN and with SCRAM-SHA-256/512 using that password.
- Kafka's own JAAS form, so an existing `server.properties` works unchanged: every
  `user_<name>="<password>"` option of a `sasl.jaas.config` value (including the
  `listener.name.<listener>.<mechanism>.sasl.jaas.config` keys) is a user the same way.
- AlterUserScramCredentials (kafka-configs --alter --add-config 'SCRAM-SHA-256=[...]',
  `kafkapy users create`) adds, replaces or deletes SCRAM credentials at run time, as records
  in the metadata log (kafkapy.controller.scram): the same on every node, kept across
  restarts. This store reads them from the node's published metadata image at each login, so
  a change is in effect on a node as soon as its image has it.

Which credential a SCRAM login checks: the metadata log's for that user and mechanism, else the
configured user's (a dynamic credential overrides the configured password for its mechanism, as
dynamic configs override static ones; deleting it brings the configured one back). PLAIN checks
the configured passwords only (Kafka's PLAIN users live in JAAS too). Configured users are this
node's own - another node may be configured differently - and cannot be deleted over the wire.

Why SCRAM credentials are derived once at start-up: the broker stores what RFC 5802 says a
server stores (salt, StoredKey, ServerKey), never needs the password after that, and one PBKDF2
per user and mechanism (4096 iterations) is a few milliseconds at start instead of per login.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from kafkapy.protocol.sasl import SCRAM_MECHANISMS, ScramCredential

if TYPE_CHECKING:
    from kafkapy.broker.config import BrokerConfig

__all__ = ["CredentialStore", "parse_users"]

#: (user, mechanism name) -> credential: the metadata image's `scram_credentials`
PublishedScram = Callable[[], Mapping[tuple[str, str], ScramCredential]]

_JAAS_USER = re.compile(r'\buser_([^\s="]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_users(value: str) -> dict[str, str]:
    """`name:password,...` -> {name: password}; ValueError on an entry without ':' or a name."""
    users: dict[str, str] = {}
    for item in value.split(","):
        if not item.strip():
            continue
        name, sep, password = item.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"kafkapy.sasl.users entry {item.strip()!r} is not NAME:PASSWORD")
        users[name.strip()] = password
    return users


def jaas_users(value: str) -> dict[str, str]:
    """The `user_<name>="<password>"` options of a JAAS login module line."""
    return {m.group(1): re.sub(r"\\(.)", r"\1", m.group(2)) for m in _JAAS_USER.finditer(value)}


class CredentialStore:
    """PLAIN passwords and SCRAM credentials of the configured users, and the SCRAM credentials
    of the metadata log (`published()`, read at each lookup); the Broker owns one
    (`broker.credentials`, built from its config)."""

    def __init__(
        self, users: dict[str, str] | None = None, *, published: PublishedScram | None = None
    ) -> None:
        self._plain: dict[str, bytes] = {}
        self._scram: dict[tuple[str, str], ScramCredential] = {}
        self._published: PublishedScram = published if published is not None else dict
        for name, password in (users or {}).items():
            self._plain[name] = password.encode("utf-8")
            for mechanism in SCRAM_MECHANISMS:
                self._scram[(mechanism, name)] = ScramCredential.from_password(mechanism, password)

    @classmethod
    def from_config(
        cls, config: BrokerConfig, *, published: PublishedScram | None = None
    ) -> CredentialStore:
        users: dict[str, str] = {}
        for value in config.jaas_configs():
            users.update(jaas_users(value))
        users.update(parse_users(config.get("kafkapy.sasl.users") or ""))
        return cls(users, published=published)

    def check_plain(self, user: str, password: str) -> bool:
        expected = self._plain.get(user)
        # compare even for an unknown user, so the time taken does not tell which users exist
        return (
            hmac.compare_digest(expected or b"\0" * 16, password.encode("utf-8"))
            and expected is not None
        )

    def scram(self, mechanism: str, user: str) -> ScramCredential | None:
        """The credential a SCRAM login of `user` checks (see the module docstring)."""
        published = self._published().get((user, mechanism))
        return published if published is not None else self._scram.get((mechanism, user))

    def configured(self, user: str) -> bool:
        """Is `user` one of this node's configured users?"""
        return user in self._plain

    def scram_users(self) -> dict[str, list[tuple[str, int]]]:
        """{user: [(mechanism, iterations), ...]} of every SCRAM login this node accepts, for
        DescribeUserScramCredentials (a published credential hides the configured one)."""
        merged = {(user, mechanism): c for (mechanism, user), c in self._scram.items()}
        merged.update(self._published())
        out: dict[str, list[tuple[str, int]]] = {}
        for (user, mechanism), credential in sorted(merged.items()):
            out.setdefault(user, []).append((mechanism, credential.iterations))
        return out
