"""decoder/remote.py: its settings; the client against a scripted local HTTP server (streams, errors, closing
on stop and cancel, outages); and against a real engine, llama.cpp's llama-server on the embedded GGUF, which skips
with the reason where ``scripts/get-engine.sh`` could not install it."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lookahead_lsp.decoder import remote
from lookahead_lsp.decoder.remote import RemoteConfig, RemoteEngine, parse_remote_config
from lookahead_lsp.decoder.types import CancelToken, DecodeRequest, DecodeResult

SECRET = "sk-test-7d1f-do-not-log"

# ---- settings -----------------------------------------------------------------------------------------


def test_parse_full_settings() -> None:
    extra = {"lookahead_config": {"max_window_size": 1, "max_ngram_size": 8}}
    raw: dict[str, Any] = {
        "url": "http://gpu-box:8000/v1",
        "model": "Qwen/Qwen2.5-Coder-7B",
        "apiKeyEnv": "ENGINE_KEY",
        "timeoutS": 2.5,
        "promptFormat": "ids",
        "extra": extra,
    }
    config, errors = parse_remote_config(raw)
    assert errors == []
    assert config == RemoteConfig("http://gpu-box:8000/v1", "Qwen/Qwen2.5-Coder-7B", "ENGINE_KEY", 2.5, "ids", extra)
    assert config.endpoint == "http://gpu-box:8000/v1/completions"
    assert parse_remote_config(config.to_settings()) == (config, [])  # what lookahead.stats shows reads back
    hash(config)  # usable in the server's settings keys


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("http://h:1", "http://h:1/v1/completions"),
        ("http://h:1/", "http://h:1/v1/completions"),
        ("https://h/v1/", "https://h/v1/completions"),
        ("http://h:1/proxy/v1/completions", "http://h:1/proxy/v1/completions"),
    ],
)
def test_endpoint(url: str, endpoint: str) -> None:
    assert RemoteConfig(url).endpoint == endpoint


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"url": "ftp://h"}, "remote.url must be an http:// or https:// URL"),
        ({"url": "http://user:pw@h"}, "must not hold credentials"),
        ({"url": "http://h", "apiKeyEnv": "sk-123 abc"}, "remote.apiKeyEnv must be the name of an environment"),
        ({"url": "http://h", "timeoutS": 0}, "remote.timeoutS must be more than 0"),
        ({"url": "http://h", "timeoutS": True}, "remote.timeoutS must be a number"),
        ({"url": "http://h", "extra": {"stream": False}}, "remote.extra must not set stream"),
        ({"url": "http://h", "promptFormat": "tokens"}, "must be 'text' or 'ids'"),
        ({"url": "http://h", "colour": 1}, "unknown setting remote.colour"),
    ],
)
def test_parse_reports_bad_values(raw: dict[str, Any], message: str) -> None:
    config, errors = parse_remote_config(raw)
    assert len(errors) == 1 and message in errors[0], errors
    assert config is not None and config.url == "http://h" or raw["url"] != "http://h"


def test_parse_keeps_previous_values_and_needs_a_url() -> None:
    previous = RemoteConfig("http://a:1", model="m", timeout_s=3.0)
    config, errors = parse_remote_config({"timeoutS": -1, "model": "n"}, previous)
    assert config == RemoteConfig("http://a:1", model="n", timeout_s=3.0)
    assert errors == ["remote.timeoutS must be more than 0 and at most 600, got -1; keeping 3.0"]
    assert parse_remote_config(None, previous) == (previous, [])
    assert parse_remote_config({"model": "m"}) == (None, ["remote.url is required (e.g. http://127.0.0.1:8000)"])
    assert parse_remote_config("http://a") == (None, ["remote must be an object, got str"])


# ---- a scripted local HTTP server ------------------------------------------------------------------------


def chars(text: str) -> list[int]:
    """The toy tokenizer of these tests: one token per character."""
    return [ord(c) for c in text]


def text_of(ids: Sequence[int]) -> str:
    return "".join(chr(i) for i in ids)


Script = Callable[["Handler"], None]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ScriptedServer

    def do_POST(self) -> None:  # noqa: N802 - the http.server naming
        length = int(self.headers.get("Content-Length", 0))
        self.server.requests.append((self.path, dict(self.headers), json.loads(self.rfile.read(length))))
        self.server.connections.add(self.client_address)
        script = self.server.scripts.pop(0) if len(self.server.scripts) > 1 else self.server.scripts[0]
        try:
            script(self)
        except (BrokenPipeError, ConnectionResetError):
            self.server.disconnects += 1
            self.close_connection = True

    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data: str) -> None:
        raw = data.encode()
        self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
        self.wfile.flush()

    def event(self, text: str = "", finish: str | None = None) -> None:
        choice = {"index": 0, "text": text, "finish_reason": finish}
        self.chunk(f"data: {json.dumps({'object': 'text_completion', 'choices': [choice]})}\n\n")
        self.server.events_sent += 1

    def end_stream(self) -> None:
        self.chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass


class ScriptedServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.scripts: list[Script] = [stream_text("hello world")]
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.connections: set[tuple[str, int]] = set()
        self.disconnects = 0
        self.events_sent = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def stream_text(text: str, pieces: int = 3, delay: float = 0.0, finish: str = "stop") -> Script:
    def script(h: Handler) -> None:
        h.start_stream()
        size = max(1, -(-len(text) // pieces))
        for i in range(0, len(text), size):
            time.sleep(delay)
            h.event(text[i : i + size])
        h.event("", finish)
        h.end_stream()

    return script


def endless(delay: float = 0.02, count: int = 300) -> Script:
    def script(h: Handler) -> None:
        h.start_stream()
        for _ in range(count):
            h.event("x")
            time.sleep(delay)
        h.end_stream()

    return script


def reply(status: int, body: bytes, content_type: str = "application/json") -> Script:
    def script(h: Handler) -> None:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return script


def raw_stream(*chunks: str) -> Script:
    def script(h: Handler) -> None:
        h.start_stream()
        for c in chunks:
            h.chunk(c)
        h.close_connection = True  # and no terminating chunk: the stream breaks off

    return script


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    thread = threading.Thread(target=srv.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


class Hooks:
    def __init__(self) -> None:
        self.outages: list[str] = []
        self.recoveries = 0

    def outage(self, message: str) -> None:
        self.outages.append(message)

    def recovery(self) -> None:
        self.recoveries += 1


@pytest.fixture
def hooks() -> Hooks:
    return Hooks()


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "BACKOFF_FIRST_S", 0.02)
    monkeypatch.setattr(remote, "BACKOFF_MAX_S", 0.05)


def engine_for(url: str, hooks: Hooks | None = None, **settings: Any) -> RemoteEngine:
    return RemoteEngine(
        RemoteConfig(url, **settings),
        detokenize=text_of,
        tokenize=chars,
        on_outage=hooks.outage if hooks else None,
        on_recovery=hooks.recovery if hooks else None,
    )


def ask(engine: RemoteEngine, max_new_tokens: int = 64, **options: Any) -> DecodeResult:
    return engine.generate(DecodeRequest(chars("<P>def f():"), max_new_tokens=max_new_tokens, **options))


def after_backoff() -> None:
    time.sleep(0.06)


# ---- the client, against the scripted server --------------------------------------------------------------


def test_streamed_completion_request_and_stats(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("ENGINE_KEY", SECRET)
    server.scripts = [stream_text("hello world", delay=0.01)]
    engine = engine_for(server.url, model="coder", api_key_env="ENGINE_KEY", extra={"top_k": 1, "stop": ["\n\n"]})
    result = ask(engine, eos_ids=frozenset({ord("~")}))
    assert text_of(result.token_ids) == "hello world"
    stats = result.stats
    assert stats.new_tokens == 11 and stats.prompt_tokens == len("<P>def f():") and stats.finish_reason == "eos"
    assert stats.prefill_ms > 0 and stats.decode_ms > 0 and stats.steps == 3 and stats.tokens_per_s > 0
    path, headers, body = server.requests[0]
    assert path == "/v1/completions"
    assert headers["Authorization"] == f"Bearer {SECRET}"
    assert body == {
        "top_k": 1,
        "prompt": "<P>def f():",
        "max_tokens": 64,
        "temperature": 0,
        "stream": True,
        "n": 1,
        "echo": False,
        "model": "coder",
        "stop": ["~", "\n\n"],
    }
    assert SECRET not in caplog.text and SECRET not in repr(engine) and SECRET not in json.dumps(engine.describe())


def test_token_ids_prompt_and_missing_key(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("ENGINE_KEY", raising=False)
    engine = engine_for(server.url, api_key_env="ENGINE_KEY", prompt_format="ids")
    assert "ENGINE_KEY (remote.apiKeyEnv) is not set" in caplog.text
    ask(engine)
    _, headers, body = server.requests[0]
    assert body["prompt"] == chars("<P>def f():") and "Authorization" not in headers and "model" not in body


def test_connection_kept_alive_and_renewed_when_the_server_closed_it(server: ScriptedServer, hooks: Hooks) -> None:
    engine = engine_for(server.url, hooks)
    ask(engine)
    ask(engine)
    assert len(server.connections) == 1

    def close_after(h: Handler) -> None:  # as a server whose keep-alive timeout ran out
        stream_text("ab")(h)
        h.close_connection = True

    server.scripts = [close_after, stream_text("cd")]
    assert text_of(ask(engine).token_ids) == "ab"
    time.sleep(0.05)
    assert text_of(ask(engine).token_ids) == "cd"
    assert hooks.outages == []


def test_stop_callback_closes_the_request(server: ScriptedServer, hooks: Hooks) -> None:
    server.scripts = [endless(), stream_text("ok")]
    engine = engine_for(server.url, hooks)
    calls: list[int] = []

    def stop(tokens: Sequence[int]) -> int | None:
        calls.append(len(tokens))
        return 3 if len(tokens) >= 5 else None

    started = time.perf_counter()
    result = ask(engine, max_new_tokens=1000, stop=stop)
    assert text_of(result.token_ids) == "xxx" and result.stats.finish_reason == "stop"
    assert time.perf_counter() - started < 2.0
    _wait_for(lambda: server.disconnects == 1)
    assert server.events_sent < 30  # the server learned at once that nobody reads any more
    assert text_of(ask(engine).token_ids) == "ok"  # and the next request opens a new connection
    assert hooks.outages == []


def test_cancel_closes_the_request_even_before_the_first_token(server: ScriptedServer, hooks: Hooks) -> None:
    def slow_prefill(h: Handler) -> None:
        h.start_stream()
        time.sleep(2.0)
        endless()(h)

    server.scripts = [slow_prefill]
    engine = engine_for(server.url, hooks)
    cancel = CancelToken()
    threading.Timer(0.15, cancel.cancel).start()
    started = time.perf_counter()
    result = ask(engine, cancel=cancel)
    assert time.perf_counter() - started < 1.0  # not the 2 s the server keeps silent
    assert result.token_ids == [] and result.stats.finish_reason == "cancelled"
    _wait_for(lambda: server.disconnects == 1)
    assert hooks.outages == [] and not engine.outage.down


def test_close_ends_a_request_in_flight_without_an_outage(server: ScriptedServer, hooks: Hooks) -> None:
    server.scripts = [endless()]
    engine = engine_for(server.url, hooks)
    threading.Timer(0.2, engine.close).start()
    result = ask(engine, max_new_tokens=1000)
    assert result.stats.finish_reason == "cancelled" and hooks.outages == []
    assert ask(engine).token_ids == [] and len(server.requests) == 1  # closed for good


class StartsWith:
    """A token-healing constraint in the toy vocabulary: the output must start with ``text``."""

    def __init__(self, text: str) -> None:
        self.text = text

    def allowed(self, generated: Sequence[int]) -> Sequence[int] | None:
        return chars(self.text[len(generated)]) if len(generated) < len(self.text) else None


@pytest.mark.parametrize(("streamed", "kept"), [("from typing", "from typing"), ("import os", ""), ("fix", "")])
def test_a_token_constraint_is_checked_on_the_output(server: ScriptedServer, streamed: str, kept: str) -> None:
    server.scripts = [stream_text(streamed)]
    result = ask(engine_for(server.url), constraint=StartsWith("fr"))
    assert text_of(result.token_ids) == kept
    assert result.stats.finish_reason == ("eos" if kept == streamed else "stop")


def test_max_new_tokens_bounds_the_output(server: ScriptedServer) -> None:
    server.scripts = [endless()]
    result = ask(engine_for(server.url), max_new_tokens=4)
    assert text_of(result.token_ids) == "xxxx" and result.stats.finish_reason == "length"


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        (reply(500, b'{"error": {"message": "CUDA out of memory", "code": 500}}'), "HTTP 500"),
        (reply(404, b"<html>no such route</html>", "text/html"), "HTTP 404 Not Found: <html>no such route</html>"),
        (reply(200, b'{"choices": []}'), "expected an event stream"),
        (raw_stream("data: {not json}\n\n"), "malformed event data"),
        (raw_stream('data: {"error": {"message": "prompt too long"}}\n\n'), "engine error: prompt too long"),
        (raw_stream('data: {"choices": [{"text": "ab"}]}\n\n'), "the stream ended without [DONE]"),
        (raw_stream("garbage\n"), "malformed event stream line"),
    ],
)
def test_failures_give_an_empty_completion_and_one_outage(
    server: ScriptedServer, hooks: Hooks, caplog: pytest.LogCaptureFixture, script: Script, reason: str
) -> None:
    server.scripts = [script, script, stream_text("back")]
    engine = engine_for(server.url, hooks)
    first = ask(engine)
    assert first.token_ids == [] and first.stats.new_tokens == 0
    assert len(hooks.outages) == 1 and reason in hooks.outages[0] and server.url in hooks.outages[0]
    assert any(reason in r.message and r.levelno == logging.WARNING for r in caplog.records)
    assert ask(engine).token_ids == []  # within the backoff: not even sent
    assert len(server.requests) == 1
    after_backoff()
    assert ask(engine).token_ids == []  # sent, failed again: still one outage
    assert len(server.requests) == 2 and len(hooks.outages) == 1 and hooks.recoveries == 0
    after_backoff()
    assert text_of(ask(engine).token_ids) == "back"
    assert hooks.recoveries == 1 and len(hooks.outages) == 1 and not engine.outage.down


def test_timeout(server: ScriptedServer, hooks: Hooks) -> None:
    def silent(h: Handler) -> None:
        time.sleep(1.0)

    server.scripts = [silent]
    engine = engine_for(server.url, hooks, timeout_s=0.2)
    started = time.perf_counter()
    assert ask(engine).token_ids == []
    assert time.perf_counter() - started < 0.9
    assert len(hooks.outages) == 1 and "timed out" in hooks.outages[0]


def test_connection_refused_then_engine_appears(hooks: Hooks) -> None:
    probe = ScriptedServer()
    url = probe.url
    probe.server_close()  # the port is free again: nobody listens
    engine = engine_for(url, hooks)
    for _ in range(3):
        assert ask(engine).token_ids == []
        after_backoff()
    assert len(hooks.outages) == 1 and "connection refused" in hooks.outages[0]
    assert engine.describe()["state"] == "down" and engine.describe()["failures"] == 3


def test_a_failing_hook_does_not_break_the_client(caplog: pytest.LogCaptureFixture) -> None:
    def broken(message: str) -> None:
        raise RuntimeError("hook bug")

    probe = ScriptedServer()
    probe.server_close()
    engine = RemoteEngine(RemoteConfig(probe.url), detokenize=text_of, tokenize=chars, on_outage=broken)
    assert ask(engine).token_ids == []
    assert "outage hook failed" in caplog.text


def _wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


# ---- against a real engine: llama.cpp's llama-server on the embedded GGUF -------------------------------------------

FIM = "<|fim_prefix|>def add(a, b):\n    return <|fim_suffix|>\n<|fim_middle|>"
LONG = (
    "<|fim_prefix|># The numbers from 1 to 1000, one per line:\nNUMBERS = [\n    1,\n    2,\n<|fim_suffix|>"
    + "<|fim_middle|>"
)


@pytest.fixture(scope="module")
def engine_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from lookahead_lsp.evaluation.remote_bench import LlamaServer, embedded_gguf, engine_unavailable

    reason = engine_unavailable()
    if reason is not None:
        print(f"SKIP real-engine tests: {reason}")
        pytest.skip(reason)
    # the engine at its own best backend even where the suite forces our kernel's level: its speed is not tested
    server = LlamaServer(embedded_gguf(), tmp_path_factory.mktemp("engine") / "engine.log", follow_level=False)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def real_tokenizer(embedded_hf_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(embedded_hf_dir))


def real_engine(server: Any, tokenizer: Any, hooks: Hooks | None = None) -> RemoteEngine:
    from lookahead_lsp.decoder.backend import remote_backend
    from lookahead_lsp.evaluation.remote_bench import LLAMA_SERVER_GREEDY

    config = RemoteConfig(server.url, timeout_s=60.0, extra=LLAMA_SERVER_GREEDY)
    if hooks is None:
        return remote_backend(config, tokenizer)
    return remote_backend(config, tokenizer, on_outage=hooks.outage, on_recovery=hooks.recovery)


def real_request(tokenizer: Any, prompt: str, max_new_tokens: int, **options: Any) -> DecodeRequest:
    from lookahead_lsp.decoder.runtime.model import stop_token_ids

    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return DecodeRequest(ids, max_new_tokens=max_new_tokens, eos_ids=stop_token_ids(tokenizer), **options)


def test_real_engine_completes(engine_server: Any, real_tokenizer: Any) -> None:
    engine = real_engine(engine_server, real_tokenizer)
    result = engine.generate(real_request(real_tokenizer, FIM, 16))
    text = real_tokenizer.decode(result.token_ids)
    print(f"real engine: {text!r} {result.stats.to_dict()}")
    assert text.startswith("a + b"), text
    assert result.stats.new_tokens == len(result.token_ids) > 0 and result.stats.prefill_ms > 0
    engine.close()


@pytest.mark.real_model
def test_real_engine_equals_local_greedy(engine_server: Any, real_tokenizer: Any) -> None:
    """Same GGUF weights, same prompt ids: llama.cpp's greedy output is the local greedy decoder's (the dense
    float32 model, its matrices written from the GGUF on this first need)."""
    from lookahead_lsp.decoder.greedy import GreedyDecoder
    from lookahead_lsp.decoder.runtime.model import load_model

    local = GreedyDecoder(load_model("embedded", device="cpu", weights="dense").model)
    engine = real_engine(engine_server, real_tokenizer)
    prompts = [FIM, "<|fim_prefix|>import os\n\n\ndef read(path):\n    <|fim_suffix|>\n<|fim_middle|>"]
    for prompt in prompts:
        remote_ids = engine.generate(real_request(real_tokenizer, prompt, 16)).token_ids
        local_ids = local.generate(real_request(real_tokenizer, prompt, 16)).token_ids
        assert real_tokenizer.decode(remote_ids) == real_tokenizer.decode(local_ids)
    engine.close()


@pytest.mark.parametrize("how", ["stop", "cancel"])
def test_real_engine_stops_generating_when_the_request_closes(
    engine_server: Any, real_tokenizer: Any, how: str
) -> None:
    engine = real_engine(engine_server, real_tokenizer)
    cancel = CancelToken()

    def stop(tokens: Sequence[int]) -> int | None:
        if len(tokens) >= 6:
            if how == "cancel":
                cancel.cancel()
                return None
            return 6
        return None

    before = len(engine_server.log_text())
    result = engine.generate(real_request(real_tokenizer, LONG, 1500, stop=stop, cancel=cancel))
    assert result.stats.finish_reason == ("stop" if how == "stop" else "cancelled")
    assert 6 <= len(result.token_ids) < 20
    # The engine stopped generating: it logs that it cancelled the task on the disconnect and then burns no
    # CPU (1500 tokens would take it a minute here), and the next request is not queued behind the old one.
    # The step under way at the close ends first: wait for the slot's release (a step of a slow backend takes
    # half a second), then for a second the engine must stay idle.
    deadline = time.monotonic() + 30
    while "stop processing" not in engine_server.log_text()[before:] and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    cpu_before = engine_server.cpu_seconds()
    time.sleep(1.0)
    idle_cpu = engine_server.cpu_seconds() - cpu_before
    log_text = engine_server.log_text()[before:]
    print(f"engine CPU in the second after the close: {idle_cpu:.2f} s; log: {log_text[-600:]}")
    assert "cancel task" in log_text, log_text[-2000:]
    assert idle_cpu < 0.3
    started = time.perf_counter()
    assert engine.generate(real_request(real_tokenizer, FIM, 4)).token_ids
    assert time.perf_counter() - started < 10
    engine.close()


def test_real_engine_outage_and_recovery(engine_server: Any, real_tokenizer: Any) -> None:
    hooks = Hooks()
    engine = real_engine(engine_server, real_tokenizer, hooks)
    assert engine.generate(real_request(real_tokenizer, FIM, 4)).token_ids
    engine_server.stop()
    try:
        for _ in range(4):
            assert engine.generate(real_request(real_tokenizer, FIM, 4)).token_ids == []
            after_backoff()
        assert len(hooks.outages) == 1 and "connection refused" in hooks.outages[0], hooks.outages
    finally:
        engine_server.start()
    deadline = time.monotonic() + 30
    while not engine.generate(real_request(real_tokenizer, FIM, 4)).token_ids:
        assert time.monotonic() < deadline, "completions did not resume"
        time.sleep(0.1)
    assert hooks.recoveries == 1 and len(hooks.outages) == 1
    engine.close()
