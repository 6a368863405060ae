"""Loopback TCP bandwidth with 1, 2 and 4 connections at once (a thread
pair each, 4 MiB sends, 2 GiB in all per run), GB/s: what the kernel gives
one host's sockets, against which the TCP relay's figures are read.

    python3 bench/loopback_tcp_bandwidth.py
"""
import socket
import threading
import time

TOTAL = 2 << 30
CHUNK = 4 << 20


def run(connections):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(connections)
    port = server.getsockname()[1]
    share = TOTAL // connections

    def receive():
        conn, _ = server.accept()
        view = memoryview(bytearray(CHUNK))
        got = 0
        while got < share:
            n = conn.recv_into(view)
            if n == 0:
                break
            got += n
        conn.close()

    def send():
        sock = socket.create_connection(("127.0.0.1", port))
        data = bytearray(CHUNK)
        sent = 0
        while sent < share:
            sock.sendall(data)
            sent += CHUNK
        sock.close()

    threads = [threading.Thread(target=receive) for _ in range(connections)]
    for t in threads:
        t.start()
    senders = [threading.Thread(target=send) for _ in range(connections)]
    start = time.perf_counter()
    for t in senders:
        t.start()
    for t in senders + threads:
        t.join()
    server.close()
    return TOTAL / (time.perf_counter() - start) / 1e9


if __name__ == "__main__":
    for n in (1, 2, 4):
        print(f"{n} connection(s): {run(n):.2f} GB/s", flush=True)
