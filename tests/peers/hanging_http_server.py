"""An HTTP server that accepts every connection, reads the request and never answers: a hung model server.

Run as ``python hanging_http_server.py COUNTFILE``: it listens on a free loopback port, prints the port on
stdout, and appends one line to COUNTFILE per request it receives, so a test can tell how many attempts a
client made. It stops when killed.
"""

from __future__ import annotations

import socket
import sys
import threading
import time


def hold(connection: socket.socket, count_file: str) -> None:
    with connection:
        connection.settimeout(5)
        try:
            connection.recv(65536)
        except OSError:
            return
        with open(count_file, "a", encoding="utf-8") as out:
            out.write("request\n")
        time.sleep(3600)  # never answer; the client's timeout has to end the wait


def main() -> None:
    count_file = sys.argv[1]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    print(listener.getsockname()[1], flush=True)
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=hold, args=(connection, count_file), daemon=True).start()


if __name__ == "__main__":
    main()
