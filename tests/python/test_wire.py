"""Unit tests of the SDK's framing, endpoints, resources and backoff (no daemons)."""

import asyncio

import pytest

import allot
from allot import link, wire


def _frames(data: bytes):
    async def run():
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await link.read_frame(reader)
    return asyncio.run(run())


def test_frame_round_trip():
    e = wire.Envelope()
    e.hello.protocol_version = 1
    e.hello.role = wire.ROLE_SCHEDULER
    assert _frames(link.encode_frame(e)) == e


def test_oversized_frame_is_refused_before_reading_it():
    header = (link.MAX_FRAME_BYTES + 1).to_bytes(4, "big")
    with pytest.raises(link.LinkError, match="limit"):
        _frames(header)


def test_truncated_and_empty_frames_are_errors():
    e = wire.Envelope()
    e.heartbeat.sequence = 7
    data = link.encode_frame(e)
    with pytest.raises(link.LinkError, match="closed"):
        _frames(data[:-1])
    with pytest.raises(link.LinkError):
        _frames((0).to_bytes(4, "big"))


def test_endpoints():
    assert allot.parse_endpoint("10.0.0.1:5050") == allot.Endpoint(host="10.0.0.1", port=5050)
    assert allot.parse_endpoint("tcp:[::1]:1") == allot.Endpoint(host="::1", port=1)
    assert allot.parse_endpoint("unix:/run/a.sock").path == "/run/a.sock"
    for bad in ("nohost", "h:99999", "unix:", ":5"):
        with pytest.raises(ValueError):
            allot.parse_endpoint(bad)


def test_resources():
    rs = allot.parse_resources("cpus:0.5;mem:64;ports:[31000-31002,31005]")
    assert allot.scalars(rs) == {"cpus": 0.5, "mem": 64.0}
    assert [(r.begin, r.end) for r in rs[2].ranges] == [(31000, 31002), (31005, 31005)]
    assert allot.fits(allot.parse_resources("cpus:0.5"), rs)
    assert not allot.fits(allot.parse_resources("cpus:1"), rs)
    for bad in ("cpus", "cpus:x", "mem:-1", "ports:[1-"):
        with pytest.raises(ValueError):
            allot.parse_resources(bad)


def test_backoff_is_jittered_and_bounded():
    b = allot.Backoff(0.1, 1.0)
    delays = [b.next_delay() for _ in range(50)]
    assert all(0 <= d <= 1.0 for d in delays)
    assert len(set(delays)) > 40  # jittered, not a fixed ladder
    b.reset()
    assert b.next_delay() <= 0.1
