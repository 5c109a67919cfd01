"""The proxy's thread-free stdin/stdout: every line read whole whatever the chunking, the last one
without a newline too, bad UTF-8 replaced, large writes never torn."""

from __future__ import annotations

import os
import threading

import anyio

from compactkit.serve._pipes import PipeLines, PipeWriter


def _read_all(lines: PipeLines) -> list[str]:
    async def collect() -> list[str]:
        return [line async for line in lines]

    return anyio.run(collect)


def test_lines_survive_any_chunking_and_a_missing_last_newline() -> None:
    big = "x" * 300_000
    payload = f'{{"a": 1}}\n{{"b": "{big}"}}\n\xff-broken'.encode("latin-1")
    read, write = os.pipe()
    os.set_blocking(read, False)

    def feed() -> None:
        for start in range(0, len(payload), 7_001):  # chunks that cut lines anywhere
            os.write(write, payload[start : start + 7_001])
        os.close(write)

    feeder = threading.Thread(target=feed)
    feeder.start()
    lines = _read_all(PipeLines(read))
    feeder.join()
    os.close(read)
    assert lines[0] == '{"a": 1}\n'
    assert lines[1] == f'{{"b": "{big}"}}\n'
    assert lines[2] == "\ufffd-broken"
    assert len(lines) == 3


def test_a_write_larger_than_the_pipe_buffer_arrives_whole() -> None:
    read, write = os.pipe()
    os.set_blocking(write, False)
    text = "é" * 500_000 + "\n"
    received = bytearray()

    def drain() -> None:
        while chunk := os.read(read, 65_536):
            received.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()

    async def send() -> None:
        out = PipeWriter(write)
        await out.write(text)
        await out.flush()

    anyio.run(send)
    os.close(write)
    reader.join()
    os.close(read)
    assert received.decode("utf-8") == text
