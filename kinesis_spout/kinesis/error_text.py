"""The text of an error reply, fit for one log line: an HTML error page (a crash inside an emulator's web server,
a proxy, a load balancer) becomes its HTTP status and title, not the page itself. Pure."""

from __future__ import annotations

import re

__all__ = ["MAX_MESSAGE_CHARS", "error_message"]

#: The longest error message kept from a reply (longer ones are cut, with "...").
MAX_MESSAGE_CHARS = 300

_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]+>")


def error_message(message: str, status: int) -> str:
    """``message`` of an error reply with HTTP ``status``, on one line: the title of an HTML page (else
    ``HTTP <status>``), whitespace collapsed, cut at :data:`MAX_MESSAGE_CHARS`. Who calls: the translation of
    botocore errors (:func:`kinesis_spout.kinesis.botocore_errors.translate`)."""
    text = message.strip()
    lowered = text[:200].lower()
    if lowered.startswith("<") and ("<html" in lowered or "<!doctype" in lowered or "<title" in lowered):
        title = _TITLE.search(text)
        title_text = " ".join(_TAG.sub(" ", title.group(1)).split()) if title else ""
        if title_text.startswith(str(status)):  # "500 Internal Server Error"
            text = title_text
        else:
            text = " ".join(part for part in (f"HTTP {status}", title_text) if part)
    else:
        text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + "..."
