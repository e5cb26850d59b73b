"""Resources written the Mesos way: ``"cpus:0.5;mem:64;ports:[31000-31005]"``."""

from __future__ import annotations

from typing import Dict, List, Sequence

from ._wire import wire


def parse_resources(text: str) -> List["wire.Resource"]:
    """Parses ``name:value`` pairs separated by ``;`` (ranges in brackets)."""
    out: List["wire.Resource"] = []
    for item in filter(None, (part.strip() for part in text.split(";"))):
        name, sep, value = item.partition(":")
        if not sep or not name or not value:
            raise ValueError(f"resource {item!r}: expected name:value")
        resource = wire.Resource(name=name.strip())
        value = value.strip()
        if value.startswith("["):
            if not value.endswith("]"):
                raise ValueError(f"resource {item!r}: unclosed range list")
            for span in filter(None, (s.strip() for s in value[1:-1].split(","))):
                begin, _, end = span.partition("-")
                if not begin.isdigit() or not (end or begin).isdigit():
                    raise ValueError(f"resource {item!r}: bad range {span!r}")
                resource.ranges.add(begin=int(begin), end=int(end or begin))
        else:
            try:
                resource.scalar = float(value)
            except ValueError:
                raise ValueError(f"resource {item!r}: {value!r} is not a number") from None
            if not resource.scalar >= 0:
                raise ValueError(f"resource {item!r}: must not be negative")
        out.append(resource)
    return out


def scalars(resources: Sequence["wire.Resource"]) -> Dict[str, float]:
    """The scalar resources as a dict (ranges left out)."""
    totals: Dict[str, float] = {}
    for r in resources:
        if not r.ranges:
            totals[r.name] = totals.get(r.name, 0.0) + r.scalar
    return totals


def fits(needed: Sequence["wire.Resource"], offered: Sequence["wire.Resource"]) -> bool:
    """True when every scalar in ``needed`` is covered by ``offered``."""
    have = scalars(offered)
    return all(have.get(name, 0.0) + 1e-9 >= amount for name, amount in scalars(needed).items())
