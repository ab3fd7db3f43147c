"""Reading Spark event-log files line by line, whatever codec Spark wrote them with.

Spark writes event logs plain, or compressed with ``spark.eventLog.compression.codec`` (Spark 4's
default: zstd, and rolling directories ``eventlog_v2_<app>/events_<n>_<app>.<codec>``). A compressed
log is **many** concatenated units, one per flush: zstd frames, or blocks of lz4-java's
``LZ4BlockOutputStream`` format (Spark's ``lz4`` codec, which is not the LZ4 frame format). Reading
only the first unit silently loses almost everything, so every reader here goes on to the end, and
streams: no file is held in memory whole.

`EventLogReading` counts what was read (bytes stored, bytes decoded) and hashes the decoded content
(the import's idempotency key), and notes a file that decodes to fewer bytes than it stores: event
JSON compresses several-fold, so that means truncated or unreadable data.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from querylog.errors import ImportSourceError
from querylog.importers import digest_key

COMPRESSED = (".zstd", ".zst", ".lz4", ".gz")
LZ4_BLOCK_MAGIC = b"LZ4Block"
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_HEADER = struct.Struct("<Biii")  # token, compressed length, decompressed length, checksum
_LZ4_RAW, _LZ4_COMPRESSED = 0x10, 0x20


@dataclass
class EventLogReading:
    """What reading one event log (file or rolling directory) took and found."""

    hasher: hashlib._Hash = field(default_factory=hashlib.sha256)
    files: int = 0
    stored_bytes: int = 0
    decoded_bytes: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def content_key(self) -> str:
        """Same key as hashing the decoded content at once (parts of a directory joined by newlines)."""
        return digest_key(self.hasher)


def event_lines(path: Path, reading: EventLogReading) -> Iterator[bytes]:
    """The decoded lines of the event log at `path` (a file, or a rolling-log directory in order)."""
    if not path.exists():
        raise ImportSourceError(f"cannot read {path}: no such file or directory")
    if not path.is_dir():
        yield from _file_lines(path, reading)
        return
    parts = sorted(
        (p for p in path.glob("events_*") if not p.name.startswith(".")),
        key=lambda p: int(p.name.split("_")[1]) if p.name.split("_")[1].isdigit() else 0,
    )
    if not parts:
        raise ImportSourceError(f"{path} is a directory without Spark event files (events_<n>_<app>...)")
    for number, part in enumerate(parts):
        if number:
            reading.hasher.update(b"\n")
        yield from _file_lines(part, reading)


def _file_lines(path: Path, reading: EventLogReading) -> Iterator[bytes]:
    decoded = 0
    try:
        stored = path.stat().st_size
        with path.open("rb") as raw, _decoder(path, raw, reading.warnings) as stream:
            for line in stream:
                reading.hasher.update(line)
                decoded += len(line)
                yield line
    except OSError as err:  # includes zstd / lz4 / gzip corruption, which the codecs raise as such
        raise ImportSourceError(f"cannot read {path}: {getattr(err, 'strerror', None) or err}") from err
    reading.files += 1
    reading.stored_bytes += stored
    reading.decoded_bytes += decoded
    if path.suffix in COMPRESSED and decoded < stored:
        reading.warnings.append(
            f"{path.name}: decoded only {decoded:,} bytes from a {stored:,}-byte compressed file "
            "(truncated or unreadable data?)"
        )


def _decoder(path: Path, raw: IO[bytes], warnings: list[str]) -> IO[bytes]:
    """A buffered binary stream of `raw`'s decoded bytes, chosen by the file's suffix."""
    suffix = path.suffix
    if suffix == ".gz":
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw))  # reads every member
    if suffix in (".zstd", ".zst"):
        try:
            import zstandard
        except ImportError as err:  # a dependency of deltaopt; only a broken install lacks it
            raise ImportSourceError(f"{path} is zstd-compressed and the zstandard package is missing") from err
        return io.BufferedReader(ZstdFramesReader(raw, zstandard.ZstdDecompressor(), path.name, warnings))
    if suffix == ".lz4":
        head = raw.peek(8)[:8] if isinstance(raw, io.BufferedReader) else b""
        if head.startswith(LZ4_FRAME_MAGIC):
            import lz4.frame

            return lz4.frame.LZ4FrameFile(raw)
        return io.BufferedReader(Lz4BlockReader(raw))
    if suffix in (".snappy", ".lzf"):
        raise ImportSourceError(
            f"{path} uses Spark's {suffix[1:]} codec, which deltaopt does not read: "
            "set spark.eventLog.compression.codec to zstd or lz4, or decompress the file first"
        )
    return raw


class _ChunkReader(io.RawIOBase):
    """A raw stream over decoded chunks: subclasses say what the next chunk is (None: the end)."""

    def __init__(self) -> None:
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._pending:
            chunk = self._next_chunk()
            if chunk is None:
                return 0
            self._pending = chunk
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def _next_chunk(self) -> bytes | None:
        raise NotImplementedError


class ZstdFramesReader(_ChunkReader):
    """Every zstd frame of a stream, one after another, noting a stream that ends inside a frame
    (a writer that died, or a log still being written): what was decoded is kept, and said."""

    CHUNK = 1 << 16

    def __init__(self, raw: IO[bytes], decompressor: Any, name: str, warnings: list[str]) -> None:
        super().__init__()
        self._raw = raw
        self._decompressor = decompressor
        self._frame = decompressor.decompressobj()
        self._started = False  # the current frame has consumed input
        self._name = name
        self._warnings = warnings
        self._done = False  # the end was seen (and, if inside a frame, said once)

    def _next_chunk(self) -> bytes | None:
        data = b"" if self._done else self._raw.read(self.CHUNK)
        if not data:
            if not self._done and self._started and not self._frame.eof:
                self._warnings.append(f"{self._name}: ends inside a zstd frame (truncated, or still being written)")
            self._done = True
            return None
        out = []
        while data:
            try:
                out.append(self._frame.decompress(data))
            except Exception as err:  # zstandard.ZstdError: corrupt data
                raise OSError(f"corrupt zstd data: {err}") from err
            self._started = True
            if not self._frame.eof:
                break
            data = self._frame.unused_data  # the next frame starts here
            self._frame = self._decompressor.decompressobj()
            self._started = False
        return b"".join(out)


class Lz4BlockReader(_ChunkReader):
    """lz4-java's ``LZ4BlockOutputStream`` format, which Spark's ``lz4`` codec writes: a sequence of
    blocks ``"LZ4Block" | token | compressed length | decompressed length | checksum | data``, where
    the token's high nibble says raw (0x10) or LZ4 (0x20); an empty block ends a stream and another
    may follow."""

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__()
        self._raw = raw

    def _next_chunk(self) -> bytes | None:
        magic = self._raw.read(len(LZ4_BLOCK_MAGIC))
        if not magic:
            return None
        header = self._raw.read(_LZ4_BLOCK_HEADER.size)
        if magic != LZ4_BLOCK_MAGIC or len(header) != _LZ4_BLOCK_HEADER.size:
            raise OSError("not an lz4-java block stream (bad block header)")
        token, compressed, decompressed, _ = _LZ4_BLOCK_HEADER.unpack(header)
        data = self._raw.read(compressed)
        if len(data) != compressed or compressed < 0 or decompressed < 0:
            raise OSError("truncated lz4-java block")
        method = token & 0xF0
        if method == _LZ4_RAW:
            return data
        if method == _LZ4_COMPRESSED:
            import lz4.block

            try:
                return bytes(lz4.block.decompress(data, uncompressed_size=decompressed))
            except lz4.block.LZ4BlockError as err:
                raise OSError(f"corrupt lz4-java block: {err}") from err
        raise OSError(f"unknown lz4-java block method 0x{method:02x}")
