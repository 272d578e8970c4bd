"""A server whose copilot turns take a while, for the tests of a second message to a conversation.

Usage: ``python texting_server.py STORE PORT``. Its copilot model writes a one-query formula; the formula's
answer step takes ``SLOW`` seconds, so a turn is still running when the next message comes.
"""

from __future__ import annotations

import sys
import time

import uvicorn
from copilot_ops import OPS

from plangate.models import ModelRequest, ScriptedModel
from plangate.server import create_app
from plangate.store import open_store

SLOW = 1.5


def main() -> None:
    store_url, port = sys.argv[1:3]

    def respond(request: ModelRequest) -> str:
        if request.purpose == "copilot":
            return OPS
        time.sleep(SLOW)
        return "There are orders."

    app = create_app(open_store(store_url), auth=False, model=ScriptedModel(respond), schedules=False)
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")


if __name__ == "__main__":
    main()
