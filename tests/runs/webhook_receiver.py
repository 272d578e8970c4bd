"""A webhook receiver, as a real process: it checks each delivery's signature with the ``standardwebhooks``
library, refuses the first attempts of each message, and can hang mid-way for the test to kill it.

Usage: ``python webhook_receiver.py PORT SECRET LOG FAIL_FIRST HANG_AT``. Each attempt past the first
``FAIL_FIRST`` of its ``webhook-id`` is written to LOG (one JSON line: ``id``, ``type``, ``run_id``,
``valid``) before it is answered 204; after writing the ``HANG_AT``-th of them (0: never), it writes
``LOG.hung`` and never answers.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook, WebhookVerificationError


def main() -> None:
    port, secret, log, fail_first, hang_at = sys.argv[1:6]
    webhook = Webhook(secret)
    attempts: Counter[str] = Counter()
    written = [0]
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {name: value for name, value in self.headers.items()}
            try:
                payload = webhook.verify(body, headers)
                valid = True
            except WebhookVerificationError:
                payload, valid = json.loads(body), False
            message = headers.get("webhook-id", "")
            with lock:
                attempts[message] += 1
                refused = attempts[message] <= int(fail_first)
                if not refused:
                    line = {"id": message, "type": payload["type"], "run_id": payload["data"]["run_id"]}
                    with open(log, "a", encoding="utf-8") as out:
                        out.write(json.dumps({**line, "valid": valid}) + "\n")
                        out.flush()
                        os.fsync(out.fileno())
                    written[0] += 1
                    hang = written[0] == int(hang_at)
            if refused:
                self.send_response(500)
                self.end_headers()
                return
            if hang:
                with open(log + ".hung", "w", encoding="utf-8") as out:
                    out.write(message)
                time.sleep(3600)  # killed here, its delivery recorded and never answered
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    ThreadingHTTPServer(("127.0.0.1", int(port)), Handler).serve_forever()


if __name__ == "__main__":
    main()
