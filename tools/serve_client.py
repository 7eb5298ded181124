"""A small client of tarnn serve for the tests and the load test: start a server on a free
port, POST JSON, read server-sent events. Standard library only."""
import base64
import http.client
import json
import os
import signal
import subprocess
import time
import urllib.parse


class Server:
    """`tarnn serve --port 0 ARGS...`, its URL read from its first line; stop() sends SIGTERM."""

    def __init__(self, binary, *args, env=None):
        self.proc = subprocess.Popen([binary, "serve", "--port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()
        if "http://" not in line:
            self.proc.kill()
            raise RuntimeError("tarnn serve did not start: " + line + self.proc.stderr.read())
        self.url = line.split()[-1]
        parts = urllib.parse.urlsplit(self.url)
        self.host, self.port = parts.hostname, parts.port

    def connect(self, timeout=120):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def get(self, path):
        c = self.connect()
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, r.getheader("Content-Type"), body

    def post(self, path, body):
        """(status, parsed JSON) of a plain answer (a score, or an error)."""
        c = self.connect()
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        c.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        text = r.read()
        c.close()
        return r.status, json.loads(text)

    def stream(self, path, body):
        """The events of a streamed run, [(name, data)], or (status, error JSON) if refused."""
        c = self.connect()
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            err = json.loads(r.read())
            c.close()
            return r.status, err
        events = list(read_events(r))
        c.close()
        return 200, events

    def stop(self, timeout=30):
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err


def read_events(response):
    """Server-sent events from an http.client response, as (name, data) until the stream ends."""
    name, data = "message", ""
    for raw in response:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data += line[6:]
        elif line == "":
            if data:
                yield name, json.loads(data)
            name, data = "message", ""


def images_of(events, T):
    """The images built from the "grow" events alone, and checks of their order: the columns
    arrive in order, without gaps or overlaps, and end at the last byte."""
    grown, shown = None, -1
    for name, d in events:
        if name != "grow":
            continue
        assert d["from"] == shown + 1, (d["from"], shown)
        assert d["to"] >= d["from"]
        parts = [base64.b64decode(s) for s in d["images"]]
        if grown is None:
            grown = [bytearray() for _ in parts]
        for g, p in zip(grown, parts):
            assert len(p) == d["to"] - d["from"] + 1
            g += p
        shown = d["to"]
    assert shown == T - 1, shown
    return [bytes(g) for g in grown]


def done_of(events):
    names = [n for n, _ in events]
    assert names[-1] == "done", names[-3:]
    return events[-1][1]


def b64(data):
    return base64.b64encode(bytes(data)).decode()


def wait_for(predicate, seconds=30):
    end = time.time() + seconds
    while time.time() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def binary():
    return os.environ.get("TARNN_BIN", "build/tarnn")
