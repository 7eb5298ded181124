#!/usr/bin/env python3
"""A bounded load test of tarnn serve over loopback: CLIENTS threads send REQUESTS completions in
all (each of a few distinct digits and seeds), then it stops. Every answer must equal that
request's answer when sent alone (nothing dropped, nothing mixed up between clients merged into
one batch); prints completions/s and latency percentiles. Standard library only.

  tools/serve_load.py --bin build/tarnn --model models/mnist --clients 32 --requests 64
"""
import argparse
import base64
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import Server, done_of, images_of  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="build/tarnn")
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "mnist"))
    ap.add_argument("--threads", default="0", help="the server's --threads")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=64, help="in all, over every client")
    ap.add_argument("--samples", type=int, default=4, help="completions per request")
    ap.add_argument("--distinct", type=int, default=8, help="different requests (digit, seed)")
    ap.add_argument("--json", help="write the figures here too")
    return ap.parse_args()


def request_bodies(a, info, digits):
    """The distinct requests, each its seed: the page's digits for a model of MNIST's size, made-up
    bytes for another; and the positions of an image."""
    T = info["height"] * info["width"] * info["channels"]
    bodies = []
    for i in range(a.distinct):
        image = base64.b64decode(digits[i % len(digits)]["image"]) if T == 784 else bytes(
            (i * 7 + t) % 256 for t in range(T))
        bodies.append({"image": base64.b64encode(image).decode(), "keep_rows": info["height"] // 2,
                       "samples": a.samples, "seed": 1000 + i})
    return bodies, T


def answers_alone(server, bodies, T):
    """Each distinct request alone, one after another: the answers to compare with."""
    alone = []
    for b in bodies:
        status, events = server.stream("/api/complete", b)
        assert status == 200, events
        alone.append(images_of(events, T))
    return alone


def send_all(server, a, bodies, alone, T):
    """CLIENTS threads send REQUESTS in all, each answer checked against its request's alone.
    Returns the latencies, the requests merged into each answer's batch, the 503s retried, the
    failures and the wall time."""
    latencies, merged, failures, lock = [], [], [], threading.Lock()
    retries = [0]

    def client(c):
        for j in range(c, a.requests, a.clients):
            k = j % a.distinct
            t0 = time.time()
            for _ in range(100):  # 503: the queue is full; wait as told and try again
                status, events = server.stream("/api/complete", bodies[k])
                if status != 503:
                    break
                with lock:
                    retries[0] += 1
                time.sleep(1)
            try:
                assert status == 200, (status, events)
                got = images_of(events, T)
                done = done_of(events)
                assert got == alone[k], f"request {j}: not its own images"
                with lock:
                    latencies.append(time.time() - t0)
                    merged.append(done["batch_requests"])
            except AssertionError as e:
                with lock:
                    failures.append(str(e)[:200])

    t0 = time.time()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, merged, retries[0], failures, time.time() - t0


def figures_of(a, info, latencies, merged, retries, failures, wall):
    done_n = len(latencies)
    return {
        "clients": a.clients, "requests": a.requests, "answered": done_n, "failures": len(failures),
        "samples_per_request": a.samples, "seconds": wall,
        "completions_per_second": done_n * a.samples / wall, "requests_per_second": done_n / wall,
        "latency_p50": percentile(latencies, 50) if latencies else None,
        "latency_p90": percentile(latencies, 90) if latencies else None,
        "latency_p99": percentile(latencies, 99) if latencies else None,
        "latency_max": max(latencies) if latencies else None,
        "mean_requests_per_batch": sum(merged) / len(merged) if merged else None,
        "retries_503": retries, "device": info["device_name"], "model": info["model"],
    }


def report(a, figures, failures):
    print(f"{figures['answered']}/{a.requests} requests answered, {len(failures)} wrong, by "
          f"{a.clients} clients in {figures['seconds']:.1f} s: "
          f"{figures['completions_per_second']:.1f} completions/s ({a.samples} per request)")
    if figures["answered"]:
        print("latency p50 {latency_p50:.2f} s  p90 {latency_p90:.2f} s  p99 {latency_p99:.2f} s  "
              "max {latency_max:.2f} s; {mean_requests_per_batch:.1f} requests merged per batch; "
              "{retries_503} answers 503 (retried)".format(**figures))
    for f in failures[:5]:
        print("FAIL:", f)
    if a.json:
        json.dump(figures, open(a.json, "w"), indent=2)


def main():
    a = parse_args()
    digits = json.load(open(os.path.join(ROOT, "src", "serve", "page", "digits.json")))["digits"]
    server = Server(a.bin, "--model", a.model, "--threads", a.threads)
    info = json.loads(server.get("/api/info")[2])
    bodies, T = request_bodies(a, info, digits)
    try:
        alone = answers_alone(server, bodies, T)
        latencies, merged, retries, failures, wall = send_all(server, a, bodies, alone, T)
    finally:
        rc, out, err = server.stop()
    report(a, figures_of(a, info, latencies, merged, retries, failures, wall), failures)
    if rc != 0:
        print("FAIL: the server exited", rc, err[-300:])
    return 0 if not failures and len(latencies) == a.requests and rc == 0 else 1

if __name__ == "__main__":
    sys.exit(main())
