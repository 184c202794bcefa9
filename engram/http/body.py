"""Reading JSON request bodies: whatever bytes arrive, a bad body is a 400 naming what is wrong.

litestar decodes bodies with msgspec and turns malformed JSON into a 400 itself, but two inputs
escape that and became 500s: JSON nested deeper than the decoder's recursion limit
(``RecursionError``) and bytes that are not UTF-8 (``UnicodeDecodeError``). This request class,
given to the app as its ``request_class``, catches exactly those two where the body is decoded.
"""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.exceptions import ClientException


class EngramRequest(Request):
    """litestar's request whose ``json()`` refuses too-deep and non-UTF-8 bodies with 400."""

    async def json(self) -> Any:
        try:
            return await super().json()
        except RecursionError:
            raise ClientException(
                "invalid JSON body: nested too deeply (no Engram body needs more than a few levels)"
            ) from None
        except UnicodeDecodeError as exc:
            raise ClientException(
                f"invalid JSON body: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset "
                f"{exc.start})"
            ) from None
