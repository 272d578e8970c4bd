"""A real OTLP/HTTP trace receiver for the tests: what Phoenix, Jaeger or an OpenTelemetry Collector take.

Usage: ``python otlp_receiver.py [FORWARD]`` binds a free loopback port and prints it; ``POST /v1/traces``
takes an ``ExportTraceServiceRequest`` (protobuf, as the SDK's OTLP exporter sends it) and keeps every span;
``GET /spans`` answers them as JSON (``trace_id``, ``span_id``, ``parent_id`` in hex, ``name``,
``attributes``), in the order they arrived, duplicates included. With ``FORWARD`` (a collector's OTLP/HTTP
base URL: Phoenix's) each request is passed on to it as it came, before it is answered: the tests read the
tree back from the collector, and every span sent, duplicates included, from here (Phoenix keeps the first
of two spans with one id, so it alone could not show a span sent twice).
"""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SPANS: list[dict[str, object]] = []
LOCK = threading.Lock()
FORWARD = sys.argv[1].rstrip("/") + "/v1/traces" if len(sys.argv) > 1 else None


def _value(value: dict[str, object]) -> object:
    return next(iter(value.values()), None)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        request = ExportTraceServiceRequest.FromString(body)
        if FORWARD is not None:
            passed = urllib.request.Request(
                FORWARD, data=body, headers={"Content-Type": "application/x-protobuf"}, method="POST"
            )
            with urllib.request.urlopen(passed, timeout=30) as response:
                response.read()
        with LOCK:
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        attributes = {a.key: _value(MessageToDict(a.value)) for a in span.attributes}
                        SPANS.append(
                            {
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_id": span.parent_span_id.hex() or None,
                                "name": span.name,
                                "attributes": attributes,
                            }
                        )
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_GET(self) -> None:
        with LOCK:
            body = json.dumps(SPANS).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
