"""A fake OpenAI-compatible model on loopback that cuts its answers short, for
bench/chaos.py --stream-cuts (issue 41).

    python bench/_fake_openai.py [--port 0] [--cut-rate 0.3] [--label primary]

It answers `POST .../chat/completions` the way the servers that broke runs
did: HTTP/1.1 with neither Content-Length nor chunked encoding, the body
delimited by closing the connection.  A body cut short is then, at the HTTP
level, indistinguishable from a whole one: only the answer's own end marker
(`finish_reason`, `data: [DONE]`) tells them apart.  In a fraction
`cut_rate` of the requests (drawn from a seeded random generator) it sends
part of the answer (at least one piece, never all of it) and closes the
connection; otherwise the whole answer, `finish_reason: stop` and `[DONE]`.
A request with `stream: false` gets one JSON body, cut in the middle of the
answer's text in the same fraction.

The answer is a function of the label and the prompt (`answer_for`), so a
bench can tell a whole answer from a partial one without asking the server.
The server counts requests and cuts, in total and per prompt.  It runs on an
event loop in a thread of its own (`start()` / `stop()`), so the process
under test does not share its loop; it imports nothing from flowforge.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import threading
from collections import Counter
from typing import Any

__all__ = ["FakeOpenAI", "answer_for"]

#: The words of every answer after its first sentence: long enough for ~10 pieces.
_TAIL = ("the product of six and seven is forty-two, which is also the answer to life, "
         "the universe and everything, as every reader of the guide knows.")


def answer_for(label: str, prompt: str) -> str:
    """The whole answer the server labelled `label` gives to `prompt`."""
    return f"{label} answers {prompt!r}: {_TAIL}"


def _pieces(text: str, size: int = 3) -> list[str]:
    words = text.split(" ")
    return [" ".join(words[i:i + size]) + (" " if i + size < len(words) else "")
            for i in range(0, len(words), size)]


def _chunk(text: str | None, finish: str | None = None) -> bytes:
    delta = {"content": text} if text is not None else {}
    body = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1,
            "model": "fake", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


def _whole_json(text: str) -> bytes:
    return json.dumps({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": "fake",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 30, "total_tokens": 40}}).encode()


class FakeOpenAI:
    """The fake server; `url` is its base URL (`.../v1`) once started."""

    def __init__(self, *, label: str = "primary", cut_rate: float = 0.3, seed: int = 7,
                 pause: float = 0.003, port: int = 0) -> None:
        self.label, self.cut_rate, self.pause, self.port = label, cut_rate, pause, port
        self.rng = random.Random(f"{seed}-{label}")
        self.requests = 0
        self.cuts = 0
        self.requests_by_prompt: Counter[str] = Counter()
        self.cuts_by_prompt: Counter[str] = Counter()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.server: asyncio.AbstractServer | None = None
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAI:
        ready = threading.Event()

        def serve() -> None:
            self.loop = asyncio.new_event_loop()
            self.server = self.loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", self.port))
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, name=f"fake-{self.label}", daemon=True)
        self.thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fake model server did not start within 10 s")
        return self

    def stop(self) -> None:
        if self.loop is None:
            return

        async def close() -> None:
            self.server.close()
            await self.server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip()
                       for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            body = json.loads(await reader.readexactly(int(headers.get("content-length", 0)))
                              or b"{}")
            prompt = next((m.get("content") for m in reversed(body.get("messages", []))
                           if m.get("role") == "user"), "") or ""
            if isinstance(prompt, list):        # content parts
                prompt = "".join(part.get("text", "") for part in prompt)
            text = answer_for(self.label, prompt)
            cut = self.rng.random() < self.cut_rate
            self.requests += 1
            self.requests_by_prompt[prompt] += 1
            if cut:
                self.cuts += 1
                self.cuts_by_prompt[prompt] += 1
            streamed = bool(body.get("stream"))
            kind = "text/event-stream" if streamed else "application/json"
            writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\n"
                         f"Connection: close\r\n\r\n".encode())
            if streamed:
                parts = [_chunk(piece) for piece in _pieces(text)]
                if cut:        # at least one piece shown, never the whole answer
                    parts = parts[:self.rng.randint(1, len(parts) - 1)]
                else:
                    parts += [_chunk(None, "stop"), b"data: [DONE]\n\n"]
            else:
                whole = _whole_json(text)
                parts = [whole[:whole.index(b'"content"') + len(text) // 2] if cut else whole]
            for part in parts:
                writer.write(part)
                await writer.drain()
                await asyncio.sleep(self.pause)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError,
                json.JSONDecodeError, ValueError):
            pass                  # the client went away first, or sent no JSON
        finally:
            writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cut-rate", type=float, default=0.3)
    parser.add_argument("--label", default="primary")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    server = FakeOpenAI(label=args.label, cut_rate=args.cut_rate, seed=args.seed,
                        port=args.port).start()
    print(f"OPENAI_COMPATIBLE_{args.label.upper()}_BASE_URL={server.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        print(json.dumps({"requests": server.requests, "cuts": server.cuts}))
        server.stop()


if __name__ == "__main__":
    main()
