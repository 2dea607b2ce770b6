#!/usr/bin/env python3
"""NCCL's RAS service as a stub, for tests (docs/standin.md): answers one
`ncclras` client on loopback with its text protocol ("CLIENT PROTOCOL n" ->
"SERVER PROTOCOL 2", "TIMEOUT s" -> "OK", "STATUS" -> the report, then close).

usage: ras_stub.py PORT_FILE SECONDS REPORT_FILE
Writes the port it listens on to PORT_FILE (atomically: a reader sees it whole),
serves one client, and gives up after SECONDS without one (exit 1)."""
import os
import socket
import sys

port_file, seconds, report_file = sys.argv[1], float(sys.argv[2]), sys.argv[3]
with open(report_file) as f:
    report = f.read()
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(1)
server.settimeout(seconds)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.getsockname()[1]))
os.rename(port_file + ".tmp", port_file)
try:
    conn, _ = server.accept()
except socket.timeout:
    sys.exit(1)
conn.settimeout(seconds)
stream = conn.makefile("rw")
for line in stream:
    if line.startswith("CLIENT PROTOCOL"):
        stream.write("SERVER PROTOCOL 2\n")
    elif line.startswith("TIMEOUT"):
        stream.write("OK\n")
    elif line.startswith("STATUS"):
        stream.write(report)
        stream.flush()
        break
    stream.flush()
conn.close()
