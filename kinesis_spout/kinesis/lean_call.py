"""One Kinesis operation of a botocore client, called lean: botocore's request template, signer and HTTP session,
without its per-call machinery. The shared part of :mod:`~kinesis_spout.kinesis.retrieval.lean` (GetRecords) and
:mod:`~kinesis_spout.kinesis.writing.lean_put` (PutRecords); each writes its own body and parses its own replies.

- :meth:`LeanCall.capture` runs the operation's first call through botocore: botocore builds and signs the request
  as usual, and a ``before-send`` hook notes the URL and the headers botocore chose (its endpoint resolution, its
  user agent) and stops it before it is sent;
- :meth:`LeanCall.send` builds that request with a body of the caller's, has botocore's own request signer sign it
  (same credentials, same refresh, same region and signing name) and sends it on botocore's own HTTP session (same
  pool, proxies, TLS and time-outs);
- :meth:`LeanCall.botocore_parse` hands a reply the caller does not know to botocore's parser for the operation, and
  raises an error reply as the exception botocore would raise.

Thread-safe: the template is written once, under a lock; ``calls`` and ``fallbacks`` are counters written by the
callers (read them from any thread).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from botocore.awsrequest import AWSRequest
from botocore.endpoint import convert_to_response_dict

__all__ = ["Fallback", "LeanCall"]

_KEPT_HEADERS = ("content-type", "x-amz-target", "user-agent")


class _Captured(Exception):
    """Raised by the ``before-send`` hook once botocore's first request was noted: nothing is sent."""


class Fallback(Exception):
    """The reply holds something the lean parser does not know: botocore parses it."""


class LeanCall:
    """The operation ``operation`` (e.g. ``"GetRecords"``) of one botocore Kinesis ``client``. ``calls`` and
    ``fallbacks`` count lean requests sent and the replies handed to botocore's parser."""

    def __init__(self, client: Any, operation: str) -> None:
        self._client = client
        self._operation = operation
        self._lock = threading.Lock()
        self._template: tuple[str, dict[str, str]] | None = None  # URL and headers of botocore's own request
        self._hooked = False
        self._capturing = threading.local()  # set while this object asks botocore for its request
        self.calls = 0
        self.fallbacks = 0

    @property
    def ready(self) -> bool:
        """True once the first call's request template was captured (then :meth:`send` works)."""
        return self._template is not None

    def capture(self, first_call: Callable[[], object]) -> None:
        """Note botocore's request for the operation: ``first_call`` makes the call through the client (botocore
        builds and signs it), the ``before-send`` hook keeps its URL and headers and stops it, so nothing is sent."""
        with self._lock:
            if not self._hooked:
                self._client.meta.events.register(f"before-send.kinesis.{self._operation}", self._capture)
                self._hooked = True
        self._capturing.active = True
        try:
            first_call()
        except _Captured:
            pass
        finally:
            self._capturing.active = False
        if self._template is None:  # pragma: no cover - the hook always captures the first request
            raise RuntimeError(f"{self._operation}: botocore's request was not captured")

    def _capture(self, request: Any, **_: Any) -> None:
        if not getattr(self._capturing, "active", False):
            return  # a plain call of the operation by someone else: botocore sends it
        keep = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()
                if k.lower() in _KEPT_HEADERS}
        with self._lock:
            if self._template is None:
                self._template = (request.url, keep)
        raise _Captured

    def send(self, body: bytes) -> Any:
        """One signed request with ``body`` on botocore's HTTP session; the raw ``AWSResponse`` (needs the template
        of :meth:`capture`)."""
        assert self._template is not None, f"the first {self._operation} of a client goes through botocore"
        url, headers = self._template
        request = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
        client = self._client
        client._request_signer.sign(self._operation, request)
        response = client._endpoint.http_session.send(request.prepare())
        self.calls += 1
        return response

    def answer(self, response: Any, parse: Callable[[bytes], dict[str, Any]]) -> dict[str, Any]:
        """The reply in ``response``: ``parse(content)`` of a 200 the lean parser knows, else (an error reply, a
        shape it does not know: :class:`Fallback` or a malformed document) what botocore makes of it, counted in
        ``fallbacks``."""
        if response.status_code == 200:
            try:
                return parse(response.content)
            except (Fallback, ValueError, KeyError, TypeError, AttributeError):
                pass
        self.fallbacks += 1
        return self.botocore_parse(response)

    def botocore_parse(self, response: Any) -> dict[str, Any]:
        """What botocore makes of ``response``: the parsed reply, or the exception it raises for an error."""
        client = self._client
        model = client.meta.service_model.operation_model(self._operation)
        factory = client._endpoint._response_parser_factory
        parser = factory.create_parser(model.metadata["protocol"])
        parsed: dict[str, Any] = parser.parse(convert_to_response_dict(response, model), model.output_shape)
        if response.status_code >= 300:
            code = parsed.get("Error", {}).get("Code")
            raise client.exceptions.from_code(code)(parsed, self._operation)
        return parsed
