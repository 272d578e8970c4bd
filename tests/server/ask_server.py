"""A server with a broker, for the fault test to kill mid-turn.

Usage: ``python ask_server.py STORE BROKER PORT MARKER [hang]``. Its copilot model writes a query and an
answer step; with ``hang``, the answer step writes MARKER and sleeps there until the process is killed.
Start-up recovery runs as in ``plangate serve --broker``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import uvicorn
from copilot_ops import OPS

from plangate.models import ModelRequest, ScriptedModel
from plangate.server import create_app
from plangate.store import open_store


def main() -> None:
    store_url, broker, port, marker = sys.argv[1:5]
    hang = sys.argv[5:] == ["hang"]

    def respond(request: ModelRequest) -> str:
        if request.purpose == "copilot":
            return OPS
        if hang:
            Path(marker).write_text("answering", encoding="utf-8")
            time.sleep(120)  # the test kills the process here
        return "There are orders."

    store = open_store(store_url)
    app = create_app(store, auth=False, model=ScriptedModel(respond), broker=broker)
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")


if __name__ == "__main__":
    main()
