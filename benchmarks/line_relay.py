"""The floor for any MCP proxy on stdio: a relay that does nothing but pass each line between its
client and the server it starts (plain asyncio pipes, no parsing, no SDK). Measured beside
`compactkit mcp-proxy` in the serve replay, it shows what the extra process hop alone costs.

    python benchmarks/line_relay.py COMMAND ARGS...
"""

from __future__ import annotations

import asyncio
import sys

_LIMIT = 1 << 28  # one line may be a whole file


async def main(command: list[str]) -> None:
    proc = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=_LIMIT
    )
    assert proc.stdin is not None and proc.stdout is not None
    loop = asyncio.get_running_loop()
    client_in = asyncio.StreamReader(limit=_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(client_in), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout
    )
    client_out = asyncio.StreamWriter(transport, protocol, None, loop)

    async def up() -> None:
        assert proc.stdin is not None
        while line := await client_in.readline():
            proc.stdin.write(line)
            await proc.stdin.drain()
        proc.stdin.close()

    async def down() -> None:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            client_out.write(line)
            await client_out.drain()

    await asyncio.gather(up(), down())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
