"""Every handler is found by its API's name: the module that registers an API names it, with the
version range it serves, in its module doc - so a reader who knows the API (or greps for it)
finds its handler and what it supports, and a version bump that forgets the doc fails here."""

from __future__ import annotations

import re
import sys

import pytest

from kafkapy.broker.handlers import load_handlers
from kafkapy.broker.handlers.registry import CONTROLLER_REGISTRY, REGISTRY, HandlerSpec, handler
from kafkapy.protocol import ApiKey

load_handlers()

SPECS = [("broker", s) for s in REGISTRY.values()] + [("controller", s) for s in CONTROLLER_REGISTRY.values()]


def _kafka_name(spec: HandlerSpec) -> str:
    return "".join(word.capitalize() for word in spec.api_key.name.lower().split("_"))


@pytest.mark.parametrize(("listener", "spec"), SPECS, ids=[f"{lis}-{s.api_key.name}" for lis, s in SPECS])
def test_the_handler_module_doc_names_the_api_and_its_versions(listener: str, spec: HandlerSpec) -> None:
    module = sys.modules[spec.func.__module__]
    doc = " ".join((module.__doc__ or "").split())
    name = _kafka_name(spec)
    versions = f"v{spec.min_version}" if spec.min_version == spec.max_version else f"v{spec.min_version}-{spec.max_version}"
    # the name, then within the same clause the served range (e.g. "DescribeCluster (key 60) v0-1")
    pattern = re.escape(name) + r"[^.;]{0,40}?" + re.escape(versions) + r"(?![-\d])"
    assert re.search(pattern, doc), f"{module.__name__} serves {name} {versions} ({listener}) but its doc does not say so"


def test_a_second_handler_for_a_served_api_is_refused() -> None:
    """One handler per API: registering another one for a key already served is a programming
    error, and the served one stays."""
    served = REGISTRY[ApiKey.DESCRIBE_PRODUCERS]

    async def another(ctx: object, req: object) -> None:
        return None

    with pytest.raises(ValueError, match="registered twice"):
        handler(ApiKey.DESCRIBE_PRODUCERS, min_version=0, max_version=0)(another)
    assert REGISTRY[ApiKey.DESCRIBE_PRODUCERS] is served
