"""One framed, handshaken link to an allot daemon (``proto/FORMAT.md``).

Frames are a 4-byte big-endian length and a serialized ``Envelope``; the
first frame each side sends is a ``Hello``. A master's Hello carries its
leader epoch; a link refuses a master older than one it has seen
(``docs/links.md`` section 4).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import ssl
import struct
from typing import Awaitable, Callable, Optional

from ._wire import wire

PROTOCOL_VERSION = 1
MAX_FRAME_BYTES = 16 << 20
HANDSHAKE_TIMEOUT_S = 10.0
_HEADER = struct.Struct(">I")


class LinkError(Exception):
    """The link is unusable: refused handshake, bad frame, closed peer."""


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """A TCP ``host:port`` or a Unix socket ``path``."""

    host: str = ""
    port: int = 0
    path: str = ""

    def describe(self) -> str:
        return f"unix:{self.path}" if self.path else f"{self.host}:{self.port}"


def parse_endpoint(text: str) -> Endpoint:
    """Parses ``host:port``, ``tcp:host:port`` or ``unix:/path``."""
    if text.startswith("unix:"):
        path = text[5:]
        if not path or len(path) > 107:
            raise ValueError(f"endpoint {text!r}: bad socket path")
        return Endpoint(path=path)
    if text.startswith("tcp:"):
        text = text[4:]
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"endpoint {text!r}: expected HOST:PORT")
    return Endpoint(host=host.strip("[]"), port=int(port))


@dataclasses.dataclass(frozen=True)
class Leader:
    """The leading master as a detector sees it."""

    endpoint: Endpoint
    epoch: int = 0
    id: str = ""


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    """Mutual TLS: this peer's certificate and key, and the cluster's CA."""

    cert: str
    key: str
    ca: str

    def client_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        # Certificates name roles and principals, not hosts (docs/links.md).
        context.check_hostname = False
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(self.ca)
        context.load_cert_chain(self.cert, self.key)
        return context


def encode_frame(envelope: "wire.Envelope") -> bytes:
    payload = envelope.SerializeToString()
    if not payload or len(payload) > MAX_FRAME_BYTES:
        raise LinkError(f"cannot frame a message of {len(payload)} bytes")
    return _HEADER.pack(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader) -> "wire.Envelope":
    """Reads one frame; LinkError on end of stream, oversize or bad payload."""
    try:
        header = await reader.readexactly(_HEADER.size)
        (length,) = _HEADER.unpack(header)
        if length == 0 or length > MAX_FRAME_BYTES:
            raise LinkError(f"frame of {length} bytes (limit {MAX_FRAME_BYTES})")
        payload = await reader.readexactly(length)
    except asyncio.IncompleteReadError as e:
        raise LinkError("peer closed the link") from e
    envelope = wire.Envelope()
    try:
        envelope.ParseFromString(payload)
    except Exception as e:  # protobuf's DecodeError and friends
        raise LinkError(f"undecodable frame: {e}") from e
    if envelope.WhichOneof("body") is None:
        raise LinkError("frame with no message")
    return envelope


def _server_role_ok(writer: asyncio.StreamWriter) -> Optional[str]:
    """With TLS, the server's certificate must name the role it plays (OU)."""
    ssl_object = writer.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert() or {}
    units = [value for rdn in cert.get("subject", ()) for key, value in rdn
             if key == "organizationalUnitName"]
    return None if "master" in units else f"server certificate role is {units or 'absent'}, not master"


class Link:
    """One open, handshaken link. Create it with :meth:`open`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 peer_hello: "wire.Hello") -> None:
        self._reader = reader
        self._writer = writer
        self.peer_hello = peer_hello

    @classmethod
    async def open(cls, endpoint: Endpoint, role: int, name: str, *,
                   tls: Optional[TlsFiles] = None, expect_role: int = wire.ROLE_MASTER,
                   min_epoch: int = 0, timeout: float = HANDSHAKE_TIMEOUT_S) -> "Link":
        """Connects, swaps Hellos and checks the peer's version, role and epoch."""
        return await asyncio.wait_for(
            cls._open(endpoint, role, name, tls, expect_role, min_epoch), timeout)

    @classmethod
    async def _open(cls, endpoint: Endpoint, role: int, name: str, tls: Optional[TlsFiles],
                    expect_role: int, min_epoch: int) -> "Link":
        if endpoint.path:
            reader, writer = await asyncio.open_unix_connection(endpoint.path)
        else:
            context = tls.client_context() if tls else None
            reader, writer = await asyncio.open_connection(endpoint.host, endpoint.port,
                                                           ssl=context)
        try:
            if tls and (problem := _server_role_ok(writer)):
                raise LinkError(problem)
            hello = wire.Envelope()
            hello.hello.protocol_version = PROTOCOL_VERSION
            hello.hello.role = role
            hello.hello.name = name
            writer.write(encode_frame(hello))
            first = await read_frame(reader)
            if first.HasField("hello_rejected"):
                raise LinkError(f"{endpoint.describe()} refused us: {first.hello_rejected.reason}")
            if not first.HasField("hello"):
                raise LinkError(f"{endpoint.describe()}: first frame is not a Hello")
            peer = first.hello
            if peer.protocol_version != PROTOCOL_VERSION:
                raise LinkError(f"{endpoint.describe()} speaks protocol {peer.protocol_version}")
            if peer.role != expect_role:
                raise LinkError(f"{endpoint.describe()} is a {wire.Role.Name(peer.role)}")
            if peer.leader_epoch < min_epoch:
                raise LinkError(f"{endpoint.describe()} has leader epoch {peer.leader_epoch}, "
                                f"older than {min_epoch}: not the leader")
            return cls(reader, writer, peer)
        except BaseException:
            writer.close()
            raise

    async def recv(self) -> "wire.Envelope":
        return await read_frame(self._reader)

    async def serve(self, dispatch: Callable[["wire.Envelope"], Awaitable[None]]) -> LinkError:
        """Hands every message to ``dispatch`` until the link fails; returns why."""
        try:
            while True:
                await dispatch(await self.recv())
        except LinkError as e:
            return e

    def send(self, envelope: "wire.Envelope") -> None:
        if self._writer.is_closing():
            raise LinkError("link closed")
        self._writer.write(encode_frame(envelope))

    async def drain(self) -> None:
        await self._writer.drain()

    def close(self) -> None:
        self._writer.close()


class Backoff:
    """Exponential backoff with full jitter: each wait is uniform in [0, bound]."""

    def __init__(self, minimum: float = 0.1, maximum: float = 5.0) -> None:
        self.minimum = minimum
        self.maximum = maximum
        self._bound = minimum

    def next_delay(self) -> float:
        delay = random.uniform(0, self._bound)
        self._bound = min(self._bound * 2, self.maximum)
        return delay

    def reset(self) -> None:
        self._bound = self.minimum
