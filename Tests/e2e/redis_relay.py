"""A TCP relay between a node and a real redis-server that can hold back Redis's answers and cut
the connections it relays, for faults a real network makes and a test cannot ask Redis for: an
answer lost with its connection after Redis ran the command (test_cluster_faults.py), a node's
notice connection gone quiet while its commands flow (test_cluster_history.py).
"""

import socket
import threading

from conftest import HOST


class RedisRelay:
    """Relays every connection made to `port` to Redis. `hold_replies` stops passing Redis's
    bytes on, on the connections relayed so far (all, or those whose first commands held
    `marker`: `SUBSCRIBE` for a node's notice connection), while the node's commands still go
    through; while `refusing` is set, a connection is closed as soon as it is made; `cut` closes every connection relayed so far, and connections
    made after it are relayed whole."""

    def __init__(self, redis_port: int):
        self.redis_port = redis_port
        self.listener = socket.create_server((HOST, 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.pairs: list[dict] = []
        self.refusing = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def _accept(self) -> None:
        while True:
            try:
                node, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:  # as a Redis out of reach would: the node retries with backoff
                node.close()
                continue
            try:
                upstream = socket.create_connection((HOST, self.redis_port))
            except OSError:  # Redis is gone (the test is ending): so is the node's connection
                node.close()
                continue
            pair = {"node": node, "redis": upstream, "sent": b"", "held": False}
            with self.lock:
                self.pairs.append(pair)
            threading.Thread(target=self._commands, args=(pair,), daemon=True).start()
            threading.Thread(target=self._replies, args=(pair,), daemon=True).start()

    def _commands(self, pair: dict) -> None:
        try:
            while data := pair["node"].recv(65536):
                if len(pair["sent"]) < 4096:
                    pair["sent"] += data[:4096]
                pair["redis"].sendall(data)
        except OSError:
            pass

    def _replies(self, pair: dict) -> None:
        try:
            while data := pair["redis"].recv(65536):
                if not pair["held"]:
                    pair["node"].sendall(data)
        except OSError:
            pass

    def hold_replies(self, marker: bytes | None = None) -> int:
        """Holds Redis's answers on the connections relayed so far that sent `marker` (any, if
        None); returns how many."""
        with self.lock:
            held = [pair for pair in self.pairs if marker is None or marker in pair["sent"]]
        for pair in held:
            pair["held"] = True
        return len(held)

    def cut(self) -> None:
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for pair in pairs:
            for sock in (pair["node"], pair["redis"]):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def close(self) -> None:
        self.listener.close()
        self.cut()
