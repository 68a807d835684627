"""JSON text as the standard library's ``json.loads`` reads it, for text that may be
untrusted (references, their metadata strings, entries of the user's cache folder).

Two differences, neither a new value:

- **Nesting too deep is a** :class:`json.JSONDecodeError` (a ``ValueError``, which every
  caller handles as "not JSON"), not the ``RecursionError`` the standard library raises,
  which escaped every handler: 200 KB of ``[`` in a shared reference file, or in its
  ``.zattrs`` or a ``.zarray`` string, made ``open_store`` raise an untyped error.
- **Text is parsed by msgspec where it accepts it** (zarr's own dependency; the
  standard library when it is absent): a wide cohort's references are mostly two long
  strings (the VCF header in ``.zattrs``, escaped twice), which msgspec reads 3x faster
  (11.6 MB at 10^6 samples: 8 against 25 ms, with the UTF-8 decode the standard library
  needs first), and then the ``.zattrs`` string they hold (9 MB there: 7 against 19 ms).
  Text msgspec refuses (a byte-order mark, ``NaN``, a lone surrogate, or anything
  malformed) is given to the standard library, whose value or error is the answer: so the
  result is ``json.loads``'s for every input, bytes or str (``tests/unit/test_json.py``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any


@functools.cache
def _msgspec() -> tuple[Callable[[str | bytes | bytearray], Any], type[Exception]] | None:
    """msgspec's JSON decoder and its error, imported on first use (``vcfvirtual --help``
    need not pay for it; an open has it already, through zarr)."""
    try:
        from msgspec import DecodeError
        from msgspec.json import decode
    except ImportError:  # pragma: no cover - zarr depends on msgspec
        return None
    return decode, DecodeError


def loads(text: str | bytes | bytearray) -> Any:
    """``json.loads(text)``, but nesting deeper than the interpreter's recursion limit is a
    :class:`json.JSONDecodeError`; read by msgspec where it accepts the text.

    Raises
    ------
    json.JSONDecodeError
        Not JSON, or nested too deep to parse.
    UnicodeDecodeError
        Bytes that are not UTF-8 (as ``json.loads``)."""
    try:
        fast = _msgspec()
        if fast is not None:
            decode, refused = fast
            try:
                return decode(text)
            # UnicodeEncodeError: a str holding a lone surrogate, which has no UTF-8 for
            # msgspec to read; the standard library reads it (or refuses it) as it is.
            except (refused, UnicodeEncodeError):
                pass  # the standard library's verdict, value or error, below
        return json.loads(text)
    except RecursionError:
        doc = text if isinstance(text, str) else ""
        raise json.JSONDecodeError("nested deeper than Python's recursion limit allows", doc, 0) from None
