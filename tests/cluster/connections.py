#!/usr/bin/env python3
"""Which cluster node each EQ process is connected to, as RabbitMQ sees it
(tests/cluster/run). Asks the management API of the first node that answers
among MGMT_PORTS (any node lists the connections of the whole cluster) and
prints one JSON object: client connection name ("eq-api", "eq-worker fast",
"eq-dispatcher") -> list of the nodes its open connections are on.

    connections.py USER PASSWORD MGMT_PORT...
"""
import base64
import json
import sys
import urllib.request

user, password, ports = sys.argv[1], sys.argv[2], sys.argv[3:]
auth = base64.b64encode(f"{user}:{password}".encode()).decode()
errors = []
for port in ports:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/connections",
                                 headers={"Authorization": "Basic " + auth})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            conns = json.load(r)
    except Exception as e:  # a stopped node: try the next
        errors.append(f"{port}: {e}")
        continue
    out = {}
    for c in conns:
        name = (c.get("client_properties") or {}).get("connection_name", "")
        if c.get("state", "running") != "running" or not name:
            continue
        out.setdefault(name, []).append(c["node"])
    print(json.dumps(out, sort_keys=True))
    sys.exit(0)
print("connections.py: no management API answered: " + "; ".join(errors), file=sys.stderr)
sys.exit(1)
