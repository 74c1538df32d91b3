"""How a run reads a kind at the least cost to the API server (pure: counts in, a choice out).

Two facts, measured with `make bench` on a local API server, drive every choice here:
- serving a request costs the API server about as much CPU as serialising `REQUEST_COST` objects
  (authentication, authorization, priority and fairness, the watch cache, the response), and
- most of an object's cost is its metadata (managedFields above all), so a metadata-only LIST costs
  about half of a full one, and a LIST costs in proportion to the objects it returns.

So a family of 50 namespaces in a cluster of 3,000 is read one namespace at a time, and a family that
is most of the cluster with one cluster-wide LIST; which one is decided per run from what the run has
just observed (the namespace LIST, and the item count the first page of a LIST reports).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping

#: One request, in objects serialised: 1.5 ms of API-server CPU per request against ~30 µs per object.
REQUEST_COST = 50
#: The first page of a LIST read only to learn how many objects there are: the API server reports how many
#: remain after it, so one object is enough (a page of 50 workloads' metadata was 60 KB, sent uncompressed).
PROBE_LIMIT = 1


def _pages(items: int, page_size: int) -> int:
    return max(1, math.ceil(items / page_size))


def per_namespace(*, total: int | None, namespaces: int, all_namespaces: int, page_size: int) -> bool:
    """Whether LISTing `namespaces` one by one (plus one cluster-wide LIST of our records, which the API
    server filters by label without serialising the rest) is cheaper than LISTing all `total` objects of
    the kind. Their objects are assumed spread over the namespaces like the rest; an unknown total reads
    cluster-wide, as a run always did."""
    if total is None:
        return False
    share = total * namespaces / max(all_namespaces, namespaces, 1)
    cluster_wide = total + REQUEST_COST * _pages(total, page_size)
    one_by_one = share + REQUEST_COST * (namespaces + 1)
    return one_by_one < cluster_wide


def first_page_limit(*, namespaces: int, all_namespaces: int, page_size: int) -> int:
    """How many objects the first page of a selected kind's LIST asks for: a whole page (a cluster-wide
    read needs no request more), unless the family is so small a part of the cluster that it is read per
    namespace once the kind has one object per namespace; then the page is read only for its item count."""
    if per_namespace(total=all_namespaces, namespaces=namespaces, all_namespaces=all_namespaces, page_size=page_size):
        return PROBE_LIMIT
    return page_size


class Fetch(enum.Enum):
    """How to read the whole objects a metadata-only LIST could not settle."""

    NAMESPACES = "one LIST per namespace"  # first at equal cost: it also sees what appeared beside them
    GET = "one GET each"
    CLUSTER = "one cluster-wide LIST"


def fetch(*, missing: Mapping[str, int], objects: Mapping[str, int], page_size: int) -> Fetch:
    """The cheapest way to read `missing` objects (count per namespace), given how many objects of the kind
    each namespace has (`objects`, from the metadata LIST)."""
    wanted = sum(missing.values())
    total = sum(objects.values())
    costs = {
        Fetch.GET: wanted * (REQUEST_COST + 1),
        Fetch.NAMESPACES: sum(REQUEST_COST * _pages(objects.get(ns, n), page_size) + objects.get(ns, n)
                              for ns, n in missing.items()),
        Fetch.CLUSTER: total + REQUEST_COST * _pages(total, page_size),
    }
    return min(costs, key=lambda way: (costs[way], list(Fetch).index(way)))
