"""The head node's infrastructure: ``infra.out`` as srtctl's ``setup_head.py`` writes it, NATS and etcd.

srtctl starts ``setup_head.py`` on the infra node; it logs its own steps and lets nats-server and
etcd write into the same file (``etcd.log`` is opened and left empty). The demo starts neither
server: their lines are a short stand-in for theirs.
"""

import datetime
import os
import socket

from .util import LineLog, stamp


def host_ip() -> "tuple[str, bool]":
    """This node's address as setup_head.py finds it; False when it falls back to loopback."""
    try:
        ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        ip = ""
    if ip and not ip.startswith("127.") and ip != "0.0.0.0":
        return ip, True
    return "127.0.0.1", False


class Infra:
    def __init__(self, logs: str, name: str) -> None:
        self.log = LineLog(os.path.join(logs, "infra.out"))
        self.name = name
        open(os.path.join(logs, "etcd.log"), "a").close()

    def info(self, text: str, level: str = "INFO") -> None:
        self.log.write(f"{stamp()} [{level}] {text}")

    def start(self, nats_pid: int) -> None:
        self.info(f"Setting up head node infrastructure for: {self.name}")
        ip, found = host_ip()
        if not found:
            self.info("Could not determine local IP, using 127.0.0.1", "WARNING")
        self.info(f"Host IP: {ip}")
        self.info("Starting NATS server...")
        self.info(f"NATS server started (PID: {nats_pid})")
        self.info("Starting etcd server...")
        self.info(f"etcd server started (PID: {nats_pid + 1})")
        now = datetime.datetime.now()
        nats = now.strftime("%Y/%m/%d %H:%M:%S.%f")
        for text in ("Starting nats-server", "  Version:  2.9.10", "Starting JetStream",
                     "Listening for client connections on 0.0.0.0:4222", "Server is ready"):  # fmt: skip
            self.log.write(f"[{nats_pid}] {nats} [INF] {text}")
        etcd = now.strftime("%Y-%m-%d %H:%M:%S.%f")
        for text in (
            "I | etcdmain: etcd Version: 3.4.23",
            "I | embed: ready to serve client requests",
            "N | embed: serving insecure client requests on [::]:2379, this is strongly discouraged!",
        ):
            self.log.write(f"{etcd} {text}")

    def ready(self) -> None:
        self.info("NATS is ready on port 4222")
        self.info("etcd is ready on port 2379")
        self.info("Head node infrastructure is ready")
        self.info("  NATS: nats://localhost:4222")
        self.info("  etcd: http://localhost:2379")

    def close(self) -> None:
        self.log.close()
