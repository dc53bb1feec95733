"""One INFO line per topic change this broker applies from the metadata log, in place of a line
per partition.

Why: a topic of 50 partitions created, grown or failed over is one event for a person reading
the log; the per-partition leader/follower lines stay at DEBUG in `partition_roles`. A change
says what changed (created with its partition count, replication factor and configs; grown;
configs set; which partitions this broker now leads or follows), and what this broker's part
in the topic is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkapy.broker.metadata_store import TopicInfo
    from kafkapy.controller.image import TopicImage

__all__ = ["Roles", "first_image", "topic_change"]

#: this broker's role per partition of a topic: True leads, False follows (absent: no replica)
Roles = dict[int, bool]


def _part(after: Roles) -> str:
    leads = sum(after.values())
    follows = len(after) - leads
    return f"this broker leads {leads} and follows {follows}" if after else "no replica on this broker"


def _configs(configs: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(configs.items())) or "defaults"


def topic_change(old: TopicInfo | None, new: TopicInfo, t: TopicImage, before: Roles,
                 after: Roles) -> str | None:
    """The line for `new` (as published) against `old` (None: first seen), or None if nothing a
    person follows changed (an ISR update, a partition epoch)."""
    if old is None:
        rf = max((len(p.replicas) for p in t.partitions.values()), default=0)
        return (f"topic {new.name} created: {new.partitions} partitions, replication factor {rf}, "
                f"configs {_configs(new.configs)}; {_part(after)}")
    changes = []
    if new.partitions != old.partitions:
        changes.append(f"{old.partitions} -> {new.partitions} partitions")
    if new.configs != old.configs:
        changes.append(f"configs now {_configs(new.configs)}")
    moved = {p: role for p, role in after.items() if before.get(p) != role}
    gone = sorted(set(before) - set(after))
    if moved or gone:
        became = [f"{'leader' if lead else 'follower'} of {p}" for p, lead in sorted(moved.items())]
        became += [f"no longer a replica of {p}" for p in gone]
        changes.append("this broker became " + ", ".join(became))
    if not changes:
        return None
    return f"topic {new.name}: " + "; ".join(changes) + f" ({_part(after)})"


def first_image(offset: int, topics: int, partitions: int, leads: int, follows: int) -> str:
    """The one line for a whole image (start-up, or catching up after a gap)."""
    return (f"metadata at offset {offset}: {topics} topics, {partitions} partitions; this "
            f"broker leads {leads} and follows {follows}")
