"""A fault-injecting HTTP/1.1 proxy for the remote tier's tests: it sits
between Amphora and the S3 server, relays each request and its response
whole (keeping connections alive as the client does), counts the bytes it
relays, and, when told, injects one fault per request:

    fail(status, times)     answer `status` (503, 500...) with an S3 error
                            document instead of forwarding, `times` requests
    cut(after, times)       forward, then close the client's connection
                            after `after` bytes of the response
    stall(seconds, times)   forward, then hold the response that long
                            before relaying it

Faults apply to requests whose method and target match `match` (a
substring of "METHOD TARGET"), in arrival order. Nothing is reordered.
Standard library only; one thread per client connection.
"""

import socket
import threading
import time


class FaultProxy:
    def __init__(self, upstream_host, upstream_port):
        self.upstream = (upstream_host, upstream_port)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.faults = []  # [kind, argument, times left, match]
        self.requests = []  # "METHOD TARGET" of every request seen
        self.bytes_down = 0  # response bytes relayed to the client
        self.bytes_up = 0  # request bytes relayed to the server
        self.injected = 0
        self.closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    # -- what the tests call -------------------------------------------------

    def fail(self, status, times=1, match=""):
        self._add("fail", status, times, match)

    def cut(self, after, times=1, match=""):
        self._add("cut", after, times, match)

    def stall(self, seconds, times=1, match=""):
        self._add("stall", seconds, times, match)

    def clear(self):
        with self.lock:
            self.faults = []

    def reset_counts(self):
        with self.lock:
            self.requests = []
            self.bytes_down = self.bytes_up = self.injected = 0

    def close(self):
        self.closing = True
        self.listener.close()

    # -- the relay -----------------------------------------------------------

    def _add(self, kind, argument, times, match):
        with self.lock:
            self.faults.append([kind, argument, times, match])

    def _take_fault(self, line):
        with self.lock:
            self.requests.append(line)
            for fault in self.faults:
                if fault[2] > 0 and fault[3] in line:
                    fault[2] -= 1
                    self.injected += 1
                    return fault[0], fault[1]
        return None, None

    def _accept(self):
        while not self.closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        upstream = None
        reader = client.makefile("rb")
        try:
            while True:
                head = _read_head(reader)
                if head is None:
                    return
                request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
                method, target = request_line.split(" ")[:2]
                length = _content_length(head)
                body = reader.read(length) if length else b""
                kind, argument = self._take_fault(f"{method} {target}")
                if kind == "fail":
                    doc = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>"
                           f"{'SlowDown' if argument == 503 else 'InternalError'}</Code>"
                           f"<Message>injected by the test proxy</Message></Error>").encode()
                    client.sendall(f"HTTP/1.1 {argument} Injected\r\nContent-Type: application/xml\r\n"
                                   f"Content-Length: {len(doc)}\r\n\r\n".encode() + doc)
                    continue
                if upstream is None:
                    upstream = socket.create_connection(self.upstream)
                    upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    upstream_reader = upstream.makefile("rb")
                upstream.sendall(head + body)
                with self.lock:
                    self.bytes_up += len(head) + len(body)
                response = _read_response(upstream_reader, method == "HEAD")
                if kind == "stall":
                    time.sleep(argument)
                if kind == "cut":
                    client.sendall(response[:argument])
                    with self.lock:
                        self.bytes_down += min(argument, len(response))
                    return
                client.sendall(response)
                with self.lock:
                    self.bytes_down += len(response)
        except (OSError, ValueError):
            return
        finally:
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            client.close()
            if upstream is not None:
                upstream.close()


def _read_head(reader):
    lines = []
    while True:
        line = reader.readline(65536)
        if not line:
            return None
        lines.append(line)
        if line in (b"\r\n", b"\n"):
            return b"".join(lines)


def _content_length(head):
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


def _read_response(reader, head_only):
    head = _read_head(reader)
    if head is None:
        raise ValueError("the server closed the connection")
    status = int(head.split(b" ", 2)[1])
    if head_only or status in (204, 304) or 100 <= status < 200:
        return head
    chunked = any(line.lower().startswith(b"transfer-encoding:") and b"chunked" in line.lower()
                  for line in head.split(b"\r\n"))
    if not chunked:
        return head + reader.read(_content_length(head))
    parts = [head]
    while True:
        size_line = reader.readline(65536)
        parts.append(size_line)
        size = int(size_line.split(b";")[0].strip(), 16)
        if size == 0:
            while True:  # trailers, then the blank line
                line = reader.readline(65536)
                parts.append(line)
                if line in (b"\r\n", b"\n", b""):
                    return b"".join(parts)
        parts.append(reader.read(size + 2))
