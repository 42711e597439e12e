"""File reads on the app's event loop, with aiofiles (ui/ and agent/ only: core/ never imports it).

The stores (store/) read and check their files synchronously, for `ask`, the
bench and the tests; the app's screens read the same files without blocking
the event loop: the bytes come through aiofiles here, and the store's own
`..._from_bytes` turns them into what its synchronous reader returns, so both
paths check a file the same way.
"""

from __future__ import annotations

from pathlib import Path

import aiofiles


async def read_bytes(path: Path) -> bytes:
    """The whole file, read off the event loop."""
    async with aiofiles.open(path, "rb") as f:
        return await f.read()
