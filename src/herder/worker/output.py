"""An attempt's output on its way to the server: buffered per stream, numbered, bounded.

Past the per-attempt limit the rest is dropped and one marker line says so, so a job that
prints without end cannot fill the store or the worker's memory; the worker then stops
reading it at all (``process.AttemptProcess``), so neither can it cost the worker's CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from herder.domain.artifacts import human_size

MAX_OUTPUT_BYTES_PER_ATTEMPT = 8 * 1024 * 1024
MAX_CHUNK_BYTES = 256 * 1024


@dataclass(frozen=True)
class Chunk:
    seq: int
    stream: str
    data: bytes


@dataclass
class OutputBuffer:
    limit: int = MAX_OUTPUT_BYTES_PER_ATTEMPT
    accepted: int = 0
    dropped: int = 0
    _pending: list[tuple[str, bytearray]] = field(default_factory=list)
    _next_seq: int = 0
    _marked: bool = False

    def write(self, stream: str, data: bytes) -> None:
        room = self.limit - self.accepted
        kept = data[:room] if room > 0 else b""
        self.dropped += len(data) - len(kept)
        self.accepted += len(kept)
        if kept:
            if self._pending and self._pending[-1][0] == stream:
                self._pending[-1][1].extend(kept)
            else:
                self._pending.append((stream, bytearray(kept)))
        if self.dropped and not self._marked:
            self._marked = True
            marker = (
                f"\n[herder] output truncated: this attempt wrote more than "
                f"{human_size(self.limit)}; the rest is dropped, and its stdout and stderr "
                "are closed\n"
            )
            self._pending.append(("system", bytearray(marker.encode())))

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def take(self) -> list[Chunk]:
        """Everything not yet sent, as numbered chunks of at most ``MAX_CHUNK_BYTES``."""
        chunks = []
        for stream, data in self._pending:
            for start in range(0, len(data), MAX_CHUNK_BYTES):
                chunks.append(
                    Chunk(self._next_seq, stream, bytes(data[start : start + MAX_CHUNK_BYTES]))
                )
                self._next_seq += 1
        self._pending.clear()
        return chunks
