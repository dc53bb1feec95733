"""`ObjectStore` over any S3-compatible service (AWS S3, MinIO, SeaweedFS, Ceph RGW) with boto3.

Why boto3: it is AWS's own, maintained client; it does SigV4 signing, the credential chain
(environment, shared credentials file, instance/container roles, SSO), regional endpoints,
path-style addressing for self-hosted stores and bounded retries with backoff - none of which
kafkapy should hand-write. It is synchronous, which suits the storage layer: the broker calls
this class from worker threads. A boto3 client is thread-safe, so one store serves every worker.

Configuration is Kafka's remote-storage plugin prefix `rsm.config.` with the key names of the
widely used Aiven tiered-storage S3 plugin (`S3Config.KEYS`), so one `server.properties` can
carry both. Credentials: `rsm.config.storage.aws.credentials.file` (an AWS shared-credentials
file, `[default]` section) or the standard AWS environment/chain; the secret is never logged
and never shown by `repr` (`S3Config` keeps it out of its fields).
"""

from __future__ import annotations

import configparser
import contextlib
import dataclasses
import logging
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import boto3
import botocore.config
import botocore.exceptions

from kafkapy.storage.remote.object_store import (
    ObjectInfo,
    ObjectNotFoundError,
    ObjectStoreError,
    ObjectStoreUnavailableError,
)

__all__ = ["RSM_CONFIG_PREFIX", "S3Config", "S3ObjectStore"]

log = logging.getLogger(__name__)

RSM_CONFIG_PREFIX = "rsm.config."
_DELETE_BATCH = 1000  # DeleteObjects' limit per request
# S3 error codes (and HTTP statuses) that mean "not now": throttling and server-side trouble
_RETRIABLE_CODES = frozenset(
    {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling"})
_NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
_CONNECTION_ERRORS = (
    botocore.exceptions.EndpointConnectionError,
    botocore.exceptions.ConnectionClosedError,
    botocore.exceptions.ConnectTimeoutError,
    botocore.exceptions.ReadTimeoutError,
    botocore.exceptions.ConnectionError,
)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class S3Config:
    """Where the remote tier's objects live; built from `rsm.config.*` by `from_properties`.

    `credentials_file` is a path, never the secret itself: the keys are read when the client is
    built, so they appear in no field, repr or log line.
    """

    bucket: str
    endpoint_url: str | None = None
    region: str = "us-east-1"
    key_prefix: str = ""
    path_style: bool = False
    credentials_file: Path | None = None
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    max_attempts: int = 3

    #: Kafka property (without the `rsm.config.` prefix) -> field
    KEYS = {
        "storage.s3.bucket.name": "bucket",
        "storage.s3.endpoint.url": "endpoint_url",
        "storage.s3.region": "region",
        "key.prefix": "key_prefix",
        "storage.s3.path.style.access.enabled": "path_style",
        "storage.aws.credentials.file": "credentials_file",
        "storage.s3.api.connect.timeout.ms": "connect_timeout_s",
        "storage.s3.api.call.timeout.ms": "read_timeout_s",
        "storage.s3.api.max.attempts": "max_attempts",
    }

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> S3Config:
        """The config from broker properties: keys under `rsm.config.` (others are ignored).

        Raises ValueError naming the key for a missing bucket or an unreadable value; unknown
        `rsm.config.` keys are ignored, as Kafka passes them to a plugin that may use them.
        """
        values: dict[str, Any] = {}
        for key, raw in props.items():
            if not key.startswith(RSM_CONFIG_PREFIX):
                continue
            field = cls.KEYS.get(key[len(RSM_CONFIG_PREFIX):])
            if field is not None:
                values[field] = _parse(key, field, raw)
        if not values.get("bucket"):
            raise ValueError(f"{RSM_CONFIG_PREFIX}storage.s3.bucket.name is required")
        return cls(**values)


def _parse(key: str, field: str, raw: str) -> Any:
    try:
        if field == "path_style":
            if raw.strip().lower() not in ("true", "false"):
                raise ValueError(raw)
            return raw.strip().lower() == "true"
        if field in ("connect_timeout_s", "read_timeout_s"):
            return int(raw) / 1000
        if field == "max_attempts":
            return max(1, int(raw))
        if field == "credentials_file":
            return Path(raw)
        if field == "key_prefix":
            return raw.strip("/")
        return raw or None if field == "endpoint_url" else raw
    except ValueError:
        raise ValueError(f"invalid value for {key}") from None


def _read_credentials(path: Path) -> dict[str, str]:
    """The `[default]` keys of an AWS shared-credentials file (only what boto3 takes)."""
    parser = configparser.ConfigParser()
    if not parser.read(path):
        raise ObjectStoreError(f"credentials file {path} cannot be read")
    section = parser["default"] if parser.has_section("default") else {}
    names = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
    return {name: section[name] for name in names if name in section}


class S3ObjectStore:
    """`ObjectStore` on one bucket; keys get `key_prefix/` prepended (module docstring)."""

    def __init__(
        self, config: S3Config, *, list_page_size: int = 1000, delete_batch: int = _DELETE_BATCH
    ) -> None:
        """`list_page_size` / `delete_batch` are S3's maxima; tests lower them to cross pages."""
        self.config = config
        self._list_page_size = list_page_size
        self._delete_batch = min(delete_batch, _DELETE_BATCH)
        self._prefix = f"{config.key_prefix}/" if config.key_prefix else ""
        credentials = _read_credentials(config.credentials_file) if config.credentials_file else {}
        client_config = botocore.config.Config(
            region_name=config.region,
            connect_timeout=config.connect_timeout_s,
            read_timeout=config.read_timeout_s,
            retries={"max_attempts": config.max_attempts, "mode": "standard"},
            s3={"addressing_style": "path" if config.path_style else "auto"},
            # Checksums only where S3 requires them: the newer default (CRC on every request)
            # is refused by several S3-compatible stores.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        self._client: Any = boto3.session.Session().client(
            "s3", endpoint_url=config.endpoint_url, config=client_config, **credentials)

    def __repr__(self) -> str:
        c = self.config
        return f"S3ObjectStore(bucket={c.bucket!r}, endpoint={c.endpoint_url!r}, prefix={c.key_prefix!r})"

    def put(self, key: str, data: bytes) -> None:
        with _mapped(key):
            self._client.put_object(Bucket=self.config.bucket, Key=self._prefix + key, Body=data)

    def put_file(self, key: str, path: Path) -> None:
        with _mapped(key), path.open("rb") as body:
            self._client.put_object(
                Bucket=self.config.bucket, Key=self._prefix + key, Body=body,
                ContentLength=path.stat().st_size)

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        if end is not None and end <= start:
            return b""
        byte_range = f"bytes={start}-{'' if end is None else end - 1}"
        with _mapped(key):
            try:
                response = self._client.get_object(
                    Bucket=self.config.bucket, Key=self._prefix + key, Range=byte_range)
            except botocore.exceptions.ClientError as exc:
                if _code(exc) == "InvalidRange":  # the range starts at or past the end
                    return b""
                raise
            return bytes(response["Body"].read())

    def list(self, prefix: str) -> list[ObjectInfo]:
        out: list[ObjectInfo] = []
        paginator = self._client.get_paginator("list_objects_v2")
        with _mapped(prefix):
            pages = paginator.paginate(
                Bucket=self.config.bucket, Prefix=self._prefix + prefix,
                PaginationConfig={"PageSize": self._list_page_size})
            for page in pages:
                out.extend(
                    ObjectInfo(item["Key"][len(self._prefix):], int(item["Size"]))
                    for item in page.get("Contents", ()))
        return sorted(out, key=lambda info: info.key)

    def delete(self, keys: Iterable[str]) -> None:
        pending = [self._prefix + key for key in keys]
        for i in range(0, len(pending), self._delete_batch):
            batch = pending[i:i + self._delete_batch]
            with _mapped(batch[0]):
                response = self._client.delete_objects(
                    Bucket=self.config.bucket,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True})
            errors = [e for e in response.get("Errors", ()) if e.get("Code") != "NoSuchKey"]
            if errors:
                raise ObjectStoreError(f"delete of {errors[0].get('Key')!r}: {errors[0].get('Code')}")


def _code(exc: botocore.exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


@contextlib.contextmanager
def _mapped(key: str) -> Iterator[None]:
    """Turns botocore's exceptions into the port's three errors (module docstring of
    `object_store`); the message names the key and the S3 error code, never a credential."""
    try:
        yield
    except _CONNECTION_ERRORS as exc:
        raise ObjectStoreUnavailableError(f"object store unreachable ({type(exc).__name__})") from exc
    except botocore.exceptions.ClientError as exc:
        code = _code(exc)
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        if code in _NOT_FOUND_CODES:
            raise ObjectNotFoundError(key) from exc
        if code in _RETRIABLE_CODES or status >= 500 or status == 429:
            raise ObjectStoreUnavailableError(f"object store busy ({code or status})") from exc
        raise ObjectStoreError(f"object store refused {key!r}: {code or status}") from exc
    except botocore.exceptions.BotoCoreError as exc:
        raise ObjectStoreError(f"object store client error ({type(exc).__name__})") from exc
