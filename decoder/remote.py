"""decoder: a remote inference engine as a decoder: one streamed OpenAI-compatible ``/v1/completions`` request per call.

Works with any server that streams ``/v1/completions`` as server-sent events: TensorRT-LLM's ``trtllm-serve``,
vLLM, llama.cpp's ``llama-server`` and ``llama_cpp.server``, TGI. Everything upstream (context, the FIM prompt,
stop rules, trimming, scheduling) stays in this process; only token generation happens on the engine.

The prompt goes out as text by default (``promptFormat: "text"``, what every such server accepts; the special
FIM tokens are parsed by the server's tokenizer) or as token ids (``"ids"``: vLLM, trtllm-serve, llama-server).
The streamed text comes back as token ids through the ``tokenize`` callable, re-tokenized whole after each
chunk (byte-level BPE round-trips exactly), so the caller's :data:`~decoder.types.StopFn` sees token ids as
from a local decoder. The moment the stop callback fires or the request is cancelled the connection is
closed, which is how every one of those servers learns to stop generating.

Failures (connection refused, timeouts, HTTP errors, malformed streams) give an empty completion and one log
line each. The first failure after a success starts an *outage*: ``on_outage(message)`` is called once, later
requests back off (a request returns empty at once until the next retry is due), and the first success after
it calls ``on_recovery()``. The API key is read from the environment variable the config names and is never
logged or shown.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from lookahead_lsp.decoder.types import CancelToken, DecodeRequest, DecodeResult, DecodeStats, FinishReason

log = logging.getLogger(__name__)

PromptFormat = Literal["text", "ids"]
Detokenize = Callable[[Sequence[int]], str]
Tokenize = Callable[[str], list[int]]

DEFAULT_TIMEOUT_S = 10.0
MAX_TIMEOUT_S = 600.0
BACKOFF_FIRST_S = 0.25  # after the first failure of an outage, the next try waits this long ...
BACKOFF_MAX_S = 4.0  # ... doubling up to this: the engine being back shows within a few seconds
CANCEL_POLL_S = 0.01  # how often a request in flight looks at its CancelToken
ERROR_BODY_CHARS = 300  # of an HTTP error's body, in the log line
# Body fields this client owns; ``extra`` may not replace them.
RESERVED_FIELDS = frozenset({"prompt", "stream", "max_tokens", "temperature", "model", "n", "echo"})
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# ---- configuration -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteConfig:
    """Where the engine is and how to ask it. ``extra`` is merged into every request body (JSON)."""

    url: str  # base URL: http(s)://host:port[/prefix], with or without the trailing /v1 or /v1/completions
    model: str = ""  # the "model" field; empty: not sent (llama.cpp ignores it, vLLM needs its served name)
    api_key_env: str | None = None  # the NAME of the environment variable that holds the API key
    timeout_s: float = DEFAULT_TIMEOUT_S  # to connect, and between two chunks of the stream
    prompt_format: PromptFormat = "text"
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def endpoint(self) -> str:
        """The full ``/v1/completions`` URL."""
        base = self.url.rstrip("/")
        if base.endswith("/completions"):
            return base
        return f"{base}/completions" if base.endswith("/v1") else f"{base}/v1/completions"

    def to_settings(self) -> dict[str, Any]:
        """The camelCase settings :func:`parse_remote_config` reads (no key in them: only the variable's name)."""
        return {
            "url": self.url,
            "model": self.model,
            "apiKeyEnv": self.api_key_env,
            "timeoutS": self.timeout_s,
            "promptFormat": self.prompt_format,
            "extra": dict(self.extra),
        }


def parse_remote_config(
    raw: Any, previous: RemoteConfig | None = None, prefix: str = "remote"
) -> tuple[RemoteConfig | None, list[str]]:
    """``{url, model, apiKeyEnv, timeoutS, promptFormat, extra}`` over ``previous``: ``(config, errors)``.

    Pure (the environment is not read). A bad value keeps its previous value and adds one readable error;
    ``raw`` None keeps ``previous``. Without a valid ``url`` (here or in ``previous``) the config is None.
    """
    if raw is None:
        return previous, []
    if not isinstance(raw, Mapping):
        return previous, [f"{prefix} must be an object, got {type(raw).__name__}"]
    values: dict[str, Any] = {}
    if previous is not None:
        values = {f: getattr(previous, f) for f in ("url", "model", "api_key_env", "timeout_s", "prompt_format")}
        values["extra"] = previous.extra
    errors: list[str] = []
    for key, value in raw.items():
        if key not in _CHECKS:
            errors.append(f"unknown setting {prefix}.{key}")
            continue
        name, check = _CHECKS[key]
        parsed, error = check(value)
        if error is None:
            values[name] = parsed
        else:
            kept = f"keeping {values[name]!r}" if name in values else "not set"
            errors.append(f"{prefix}.{key} {error}; {kept}")
    if "url" not in values:
        if "url" not in raw:
            errors.append(f"{prefix}.url is required (e.g. http://127.0.0.1:8000)")
        return None, errors
    return RemoteConfig(**values), errors


_Check = Callable[[Any], "tuple[Any, str | None]"]


def _check_url(value: Any) -> tuple[Any, str | None]:
    if not isinstance(value, str):
        return None, "must be a string"
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None, "must be an http:// or https:// URL with a host"
    if parts.username or parts.password:
        return None, "must not hold credentials (name an environment variable in apiKeyEnv)"
    if parts.query or parts.fragment:
        return None, "must have no query or fragment"
    try:
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return None, "has an invalid port"
    return value.strip(), None


def _check_model(value: Any) -> tuple[Any, str | None]:
    return (value.strip(), None) if isinstance(value, str) else (None, "must be a string")


def _check_env_name(value: Any) -> tuple[Any, str | None]:
    if value is None or value == "":
        return None, None
    if not isinstance(value, str) or not _ENV_NAME.match(value):
        return None, "must be the name of an environment variable (letters, digits, _), not the key itself"
    return value, None


def _check_timeout(value: Any) -> tuple[Any, str | None]:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None, "must be a number of seconds"
    if not 0 < value <= MAX_TIMEOUT_S:
        return None, f"must be more than 0 and at most {MAX_TIMEOUT_S:g}, got {value}"
    return float(value), None


def _check_format(value: Any) -> tuple[Any, str | None]:
    return (value, None) if value in ("text", "ids") else (None, f"must be 'text' or 'ids', got {value!r}")


def _check_extra(value: Any) -> tuple[Any, str | None]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        return None, "must be an object"
    clash = sorted(RESERVED_FIELDS & set(value))
    if clash:
        return None, f"must not set {', '.join(clash)} (the client sets them)"
    try:
        return json.loads(json.dumps(dict(value))), None
    except (TypeError, ValueError) as exc:
        return None, f"must be plain JSON ({exc})"


_CHECKS: dict[str, tuple[str, _Check]] = {
    "url": ("url", _check_url),
    "model": ("model", _check_model),
    "apiKeyEnv": ("api_key_env", _check_env_name),
    "timeoutS": ("timeout_s", _check_timeout),
    "promptFormat": ("prompt_format", _check_format),
    "extra": ("extra", _check_extra),
}


# ---- failures and outages ---------------------------------------------------------------------------


class EngineError(Exception):
    """One request to the engine failed; the message is one line and holds no secret."""


class Outage:
    """Up/down state across requests: one message per outage, a backoff while down, one recovery call.

    ``on_outage(message)`` and ``on_recovery()`` run on the calling thread; their exceptions are logged.
    """

    def __init__(
        self,
        where: str,
        on_outage: Callable[[str], None] | None = None,
        on_recovery: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.where = where
        self.on_outage = on_outage
        self.on_recovery = on_recovery
        self._clock = clock
        self.down_since: float | None = None
        self.failures = 0  # failed requests in the current outage
        self.last_error: str | None = None
        self._retry_at = 0.0

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def should_try(self) -> bool:
        """False while an outage's backoff runs: the request returns empty without touching the network."""
        return not self.down or self._clock() >= self._retry_at

    def failed(self, reason: str) -> None:
        self.failures += 1
        self.last_error = reason
        now = self._clock()
        self._retry_at = now + min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** (self.failures - 1))
        if self.down_since is not None:
            log.info("remote engine %s still failing (%d requests): %s", self.where, self.failures, reason)
            return
        self.down_since = now
        log.warning("remote engine %s failed: %s; completions are empty until it answers again", self.where, reason)
        self._call(
            self.on_outage,
            f"lookahead: the remote engine at {self.where} failed ({reason}); completions are off until it is back",
        )

    def succeeded(self) -> None:
        if self.down_since is None:
            return
        seconds = self._clock() - self.down_since
        log.info("remote engine %s is back after %.1f s (%d failed requests)", self.where, seconds, self.failures)
        self.down_since, self.failures, self.last_error = None, 0, None
        self._call(self.on_recovery)

    @staticmethod
    def _call(hook: Callable[..., None] | None, *args: Any) -> None:
        if hook is None:
            return
        try:
            hook(*args)
        except Exception:
            log.exception("remote engine outage hook failed")


# ---- the client ---------------------------------------------------------------------------------------


class RemoteEngine:
    """A :class:`~decoder.backend.Backend` that generates on a remote engine. One call at a time.

    ``detokenize`` turns the prompt ids into text (``promptFormat: "text"``) and the EOS ids into stop
    strings; ``tokenize`` turns the streamed text back into ids (without special tokens added).
    """

    name = "remote"  # a TokenConstraint is checked on the streamed tokens: a violation ends the output

    def __init__(
        self,
        config: RemoteConfig,
        *,
        detokenize: Detokenize,
        tokenize: Tokenize,
        on_outage: Callable[[str], None] | None = None,
        on_recovery: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self._detokenize = detokenize
        self._tokenize = tokenize
        parts = urlsplit(config.endpoint)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port
        self._path = parts.path or "/"
        self.outage = Outage(f"{parts.scheme}://{parts.netloc}", on_outage, on_recovery)
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if config.api_key_env:
            key = os.environ.get(config.api_key_env)
            if key:
                self._headers["Authorization"] = f"Bearer {key}"
            else:
                log.warning(
                    "environment variable %s (remote.apiKeyEnv) is not set: no API key sent", config.api_key_env
                )
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:  # no headers: they hold the key
        return f"RemoteEngine({self.config.endpoint!r}, model={self.config.model!r})"

    def warm(self, prompt_ids: Sequence[int], cancel: CancelToken | None = None, slot: Hashable | None = None) -> None:
        """Nothing to prefill here: the engine keeps its own cache."""

    def holds(self, prompt_ids: Sequence[int], slot: Hashable | None = None) -> bool:
        """The engine's cache is its own to know: as far as the daemon can tell, it holds any prompt."""
        return True

    def describe(self) -> dict[str, Any]:
        """The engine's settings and state for ``lookahead.stats``."""
        return {
            **self.config.to_settings(),
            "endpoint": self.config.endpoint,
            "state": "down" if self.outage.down else "up",
            "failures": self.outage.failures,
            "lastError": self.outage.last_error,
        }

    def close(self) -> None:
        """Done with this engine: close its connection; a request in flight, and any later one, returns empty."""
        self._closed = True
        conn = self._conn
        if conn is not None:
            _shutdown(conn)  # ends a read in flight at once; the reading thread then closes the connection
        if self._lock.acquire(blocking=False):  # no request in flight: close it here
            try:
                self._drop_connection()
            finally:
                self._lock.release()

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            _abort(conn)

    def generate(self, request: DecodeRequest) -> DecodeResult:
        stats = DecodeStats(prompt_tokens=len(request.prompt_ids), prefilled_tokens=len(request.prompt_ids))
        stats.finish_reason = "cancelled"  # what an empty answer says: there was no generation
        if self._cancelled(request) or not self.outage.should_try():
            return DecodeResult([], stats)
        with self._lock:
            try:
                tokens = self._stream(request, stats)
            except EngineError as exc:
                if not self._cancelled(request):  # else the error is the close this client did itself
                    self.outage.failed(str(exc))
                stats.finish_reason = "cancelled"
                return DecodeResult([], stats)
        self.outage.succeeded()
        stats.new_tokens = len(tokens)
        return DecodeResult(tokens, stats)

    def _cancelled(self, request: DecodeRequest) -> bool:
        return self._closed or (request.cancel is not None and request.cancel.cancelled)

    # ---- one request --------------------------------------------------------------------------------

    def body(self, request: DecodeRequest) -> dict[str, Any]:
        """The JSON body of the request for ``request`` (public for tests and for the docs)."""
        prompt: str | list[int]
        if self.config.prompt_format == "ids":
            prompt = list(request.prompt_ids)
        else:
            prompt = self._detokenize(request.prompt_ids)
        body: dict[str, Any] = {
            **self.config.extra,
            "prompt": prompt,
            "max_tokens": request.max_new_tokens,
            "temperature": 0,
            "stream": True,
            "n": 1,
            "echo": False,
        }
        if self.config.model:
            body["model"] = self.config.model
        stops = [self._detokenize([i]) for i in sorted(request.eos_ids)]
        stops += [s for s in _as_list(self.config.extra.get("stop")) if s not in stops]
        if stops:
            body["stop"] = [s for s in stops if s]
        return body

    def _stream(self, request: DecodeRequest, stats: DecodeStats) -> list[int]:
        """Send the request and read its stream until done, stopped or cancelled; the new token ids."""
        data = json.dumps(self.body(request)).encode()
        started = time.perf_counter()
        finished = False
        try:
            with _closing_on_cancel(lambda: self._conn, request.cancel):
                response = self._post(data)
                tokens, finished = self._read(response, request, stats, started)
            return tokens
        finally:
            if not finished:  # stopped early, cancelled or failed: closing tells the server to stop
                self._drop_connection()

    def _post(self, data: bytes) -> http.client.HTTPResponse:
        """POST on the kept-alive connection, or on a new one when the server had closed the old one."""
        reused = self._conn is not None
        try:
            return _post(self._connection(), self._path, data, self._headers)
        except _Unanswered:
            if not reused:
                raise
            self._drop_connection()  # the server closed the idle connection (uvicorn does after 5 s): anew
            return _post(self._connection(), self._path, data, self._headers)

    def _read(
        self, response: http.client.HTTPResponse, request: DecodeRequest, stats: DecodeStats, started: float
    ) -> tuple[list[int], bool]:
        """``(tokens, finished)``; finished: the server ended the stream and the connection is reusable."""
        text = ""
        tokens: list[int] = []
        first: float | None = None
        stats.finish_reason = "eos"  # a stream that ends without saying why ended on the model's own stop
        for event in _events(response, request.cancel):
            if request.cancel is not None and request.cancel.cancelled:
                break
            choice, timings = _choice(event)
            _record_timings(stats, timings)
            piece = choice.get("text") or ""
            if piece:
                now = time.perf_counter()
                if first is None:
                    first = now
                    stats.prefill_ms = (now - started) * 1000.0
                stats.decode_ms = (now - first) * 1000.0
                stats.steps += 1
                text += piece
                tokens = self._tokenize(text)
                cut = _cut(tokens, request)
                if cut is not None:
                    stats.finish_reason = cut[1]
                    return tokens[: cut[0]], False
            if choice.get("finish_reason"):
                stats.finish_reason = "length" if choice["finish_reason"] == "length" else "eos"
        if request.cancel is not None and request.cancel.cancelled:
            stats.finish_reason = "cancelled"
            return tokens, False
        try:
            response.read()  # the end of the chunked body: then the connection can be reused
        except (OSError, http.client.HTTPException):
            return tokens, False
        return tokens, True

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            timeout = self.config.timeout_s
            if self._https:
                self._conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=timeout, context=ssl.create_default_context()
                )
            else:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        return self._conn


class _Unanswered(EngineError):
    """The request got no response at all (refused, reset, closed before the status line)."""


def _cut(tokens: list[int], request: DecodeRequest) -> tuple[int, FinishReason] | None:
    """Where to end the output: at an EOS id, where the stop callback says, or (all of it) where the output
    breaks the constraint: the engine did not regenerate the text that token healing took from the prompt."""
    constrained = request.constraint is not None
    for i, token in enumerate(tokens):
        if token in request.eos_ids:
            return i, "eos"
        if constrained and request.constraint is not None:
            allowed = request.constraint.allowed(tokens[:i])
            constrained = allowed is not None
            if allowed is not None and token not in allowed:
                return 0, "stop"  # what came before is part of the healed text: nothing of it is kept
    if request.stop is not None:
        keep = request.stop(tokens)
        if keep is not None:
            return keep, "stop"
    if len(tokens) >= request.max_new_tokens:
        return request.max_new_tokens, "length"
    return None


def _post(
    conn: http.client.HTTPConnection, path: str, data: bytes, headers: Mapping[str, str]
) -> http.client.HTTPResponse:
    """POST and return the response once its status says it streams; EngineError otherwise."""
    try:
        conn.request("POST", path, body=data, headers=dict(headers))
        response = conn.getresponse()
    except (OSError, http.client.HTTPException) as exc:
        raise _Unanswered(_describe_io_error(exc)) from exc
    if response.status != 200:
        raise EngineError(f"HTTP {response.status} {response.reason}: {_error_text(response)}")
    content_type = response.getheader("Content-Type", "")
    if "text/event-stream" not in content_type:
        raise EngineError(f"expected an event stream, got Content-Type {content_type or 'none'!r}")
    return response


def _events(response: http.client.HTTPResponse, cancel: CancelToken | None) -> Iterator[dict[str, Any]]:
    """The JSON objects of a server-sent event stream, up to ``data: [DONE]``; EngineError when malformed."""
    data: list[str] = []
    while True:
        try:
            raw = response.readline()
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if cancel is not None and cancel.cancelled:
                return
            raise EngineError(_describe_io_error(exc)) from exc
        if not raw:
            if cancel is not None and cancel.cancelled:
                return
            raise EngineError("the stream ended without [DONE]")
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if line.startswith(":") or line.startswith(("event:", "id:", "retry:")):
            continue
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            continue
        if line:
            raise EngineError(f"malformed event stream line {line[:80]!r}")
        if not data:
            continue
        payload, data = "\n".join(data), []
        if payload.strip() == "[DONE]":
            return
        try:
            event = json.loads(payload)
        except ValueError:
            raise EngineError(f"malformed event data {payload[:80]!r}") from None
        if not isinstance(event, dict):
            raise EngineError(f"malformed event data {payload[:80]!r}")
        if "error" in event:
            raise EngineError(f"engine error: {_message(event['error'])}")
        yield event


def _choice(event: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """The first choice of a completion chunk (empty for a usage-only chunk) and llama.cpp's timings."""
    choices = event.get("choices")
    if not isinstance(choices, list):
        raise EngineError("a stream event without choices")
    choice = choices[0] if choices else {}
    if not isinstance(choice, dict) or not isinstance(choice.get("text", ""), (str, type(None))):
        raise EngineError("a stream event whose choice has no text")
    return choice, event.get("timings")


def _record_timings(stats: DecodeStats, timings: Any) -> None:
    """llama-server reports how much of the prompt it took from its cache: use it where given."""
    if isinstance(timings, dict) and isinstance(timings.get("prompt_n"), int):
        stats.prefilled_tokens = timings["prompt_n"]
        cached = timings.get("cache_n")
        if isinstance(cached, int):
            stats.reused_tokens = cached


@contextmanager
def _closing_on_cancel(
    current: Callable[[], http.client.HTTPConnection | None], cancel: CancelToken | None
) -> Iterator[None]:
    """While the block runs, a watcher shuts the socket down as soon as ``cancel`` is set.

    The reading thread is usually blocked in a read; the shutdown ends that read at once (and tells the
    server the client is gone) even when the server sends nothing, e.g. during a long prefill. A connect in
    progress is not interrupted (``timeoutS`` bounds it); its socket is shut down once it exists.
    """
    if cancel is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(CANCEL_POLL_S):
            conn = current()
            if cancel.cancelled and conn is not None and conn.sock is not None:
                _shutdown(conn)
                return

    watcher = threading.Thread(target=watch, name="remote-cancel", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def _shutdown(conn: http.client.HTTPConnection) -> None:
    sock = conn.sock
    if sock is not None:
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _abort(conn: http.client.HTTPConnection) -> None:
    _shutdown(conn)
    conn.close()


def _describe_io_error(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, http.client.IncompleteRead):
        return "the stream broke off"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _error_text(response: http.client.HTTPResponse) -> str:
    try:
        raw = response.read(4096).decode("utf-8", errors="replace")
    except (OSError, http.client.HTTPException):
        return "(no body)"
    try:
        parsed = json.loads(raw)
    except ValueError:
        return " ".join(raw.split())[:ERROR_BODY_CHARS] or "(no body)"
    return _message(parsed.get("error", parsed) if isinstance(parsed, dict) else parsed)


def _message(error: Any) -> str:
    if isinstance(error, dict) and "message" in error:
        error = error["message"]
    return " ".join(str(error).split())[:ERROR_BODY_CHARS]


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
