"""tarnn serve's JSON API over loopback: the page, the runs (the same images as the command for
the same seed, streamed in order, known pixels kept), every kind of bad request, a full queue, a
client that leaves, and a graceful SIGTERM. Needs numpy and PIL (Debian's python3)."""
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from serve_client import Server, b64, binary, done_of, images_of, read_events, wait_for  # noqa

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MNIST = os.path.join(ROOT, "models", "mnist")
SMALL = os.path.join(ROOT, "tests", "golden", "small")  # 5x4x2 images: runs take milliseconds
DIGITS = json.load(open(os.path.join(ROOT, "src", "serve", "page", "digits.json")))["digits"]


@pytest.fixture(scope="module")
def mnist():
    s = Server(binary(), "--model", MNIST, "--threads", "2")
    yield s
    rc, out, _ = s.stop()
    assert rc == 0 and "stopped" in out


@pytest.fixture(scope="module")
def small():
    s = Server(binary(), "--model", SMALL, "--threads", "2")
    yield s
    assert s.stop()[0] == 0


def digit(i=0):
    import base64
    return np.frombuffer(base64.b64decode(DIGITS[i]["image"]), np.uint8)


def test_info_and_page(small):
    status, kind, body = small.get("/api/info")
    info = json.loads(body)
    assert status == 200 and kind == "application/json"
    assert (info["height"], info["width"], info["channels"]) == (5, 4, 2)
    assert info["max_samples"] == 64
    assert (info["precision"], info["state"]) == ("fp32", "fp32")  # the engine's numerics
    # device as every JSON of tarnn's (docs/JSON.md): cpu or cuda; the words in device_name
    assert info["device"] == "cpu" and info["device_name"].startswith("cpu: "), info
    assert ", 2 threads" in info["device_name"], info
    for path, want in [("/", "text/html"), ("/app.js", "text/javascript"),
                       ("/style.css", "text/css"), ("/digits.json", "application/json")]:
        status, kind, body = small.get(path)
        assert status == 200 and kind.startswith(want) and len(body) > 100, path
    status, kind, body = small.get("/../../etc/passwd")
    assert status in (400, 404) and "error" in json.loads(body)
    status, _, body = small.get("/api/complete")  # a POST route
    assert status == 405 and "takes a POST" in json.loads(body)["error"]
    assert info["model"] == "small"  # the model's name, not its path on this machine


def raw(server, method, path, headers, body=None):
    """(status, headers, parsed JSON or None) of one request with exactly these headers."""
    import http.client
    c = http.client.HTTPConnection(server.host, server.port, timeout=30)
    c.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for k, v in headers.items():
        c.putheader(k, v)
    data = body.encode() if body is not None else None
    if data is not None:
        c.putheader("Content-Length", str(len(data)))
    c.endheaders(data)
    r = c.getresponse()
    text = r.read()
    c.close()
    return r.status, dict(r.getheaders()), (json.loads(text) if text else None)


def test_only_this_servers_names_and_pages_are_answered(small):
    own = f"127.0.0.1:{small.port}"
    done = lambda: json.loads(small.get("/api/stats")[2])["requests_done"]  # noqa: E731
    for host in (own, f"localhost:{small.port}", "127.0.0.1"):
        assert raw(small, "GET", "/api/info", {"Host": host})[0] == 200, host
    # DNS rebinding: another site's name pointed at 127.0.0.1 cannot read the API
    for host in (f"evil.example:{small.port}", "evil.example", f"127.0.0.1:{small.port + 1}", ""):
        status, _, err = raw(small, "GET", "/api/info", {"Host": host})
        assert status == 403 and "does not name this server" in err["error"], host
    # a page of another site posting text/plain (no preflight) starts no job
    before = done()
    status, _, err = raw(small, "POST", "/api/sample",
                         {"Host": own, "Origin": "http://evil.example",
                          "Content-Type": "text/plain"}, '{"n": 1}')
    assert status == 403 and "--allow-origin http://evil.example" in err["error"]
    assert done() == before
    # this server's own page, and clients that send no Origin, are answered
    status, _, _ = raw(small, "POST", "/api/score", {"Host": own, "Origin": f"http://{own}",
                                                     "Content-Type": "application/json"},
                       json.dumps({"image": b64(bytes(40))}))
    assert status == 200
    assert small.post("/api/score", {"image": b64(bytes(40))})[0] == 200


def test_allow_origin_lets_a_named_site_call_the_api():
    s = Server(binary(), "--model", SMALL, "--allow-origin", "http://lab.example:3000")
    try:
        own = f"127.0.0.1:{s.port}"
        status, headers, _ = raw(s, "OPTIONS", "/api/score",
                                 {"Host": own, "Origin": "http://lab.example:3000",
                                  "Access-Control-Request-Method": "POST"})
        assert status == 204 and headers["Access-Control-Allow-Origin"] == "http://lab.example:3000"
        status, headers, body = raw(s, "POST", "/api/score",
                                    {"Host": own, "Origin": "http://lab.example:3000",
                                     "Content-Type": "application/json"},
                                    json.dumps({"image": b64(bytes(40))}))
        assert status == 200 and "bits_per_dim" in body
        assert headers["Access-Control-Allow-Origin"] == "http://lab.example:3000"
        assert raw(s, "POST", "/api/score", {"Host": own, "Origin": "http://other.example"},
                   json.dumps({"image": b64(bytes(40))}))[0] == 403
    finally:
        assert s.stop()[0] == 0


def test_sample_is_the_commands_sample(mnist, tmp_path):
    status, events = mnist.stream("/api/sample", {"n": 3, "seed": 7})
    assert status == 200
    grown = images_of(events, 784)
    done = done_of(events)
    final = [bytes(np.frombuffer(__import__("base64").b64decode(s), np.uint8)) for s in done["images"]]
    assert grown == final
    subprocess.run([binary(), "sample", "--model", MNIST, "-n", "3", "--seed", "7", "--quiet",
                    "--npy", str(tmp_path / "s.npy")], check=True)
    want = np.load(tmp_path / "s.npy").reshape(3, 784)
    assert [bytes(w) for w in want] == final
    assert done["images_per_second"] > 0 and done["pixels_per_second"] > 0


def test_complete_is_the_commands_completion(mnist, tmp_path):
    image = digit(0)
    body = {"image": b64(image), "keep_rows": 14, "samples": 3, "seed": 5}
    status, events = mnist.stream("/api/complete", body)
    assert status == 200
    got = images_of(events, 784)
    assert len(got) == 3
    for g in got:  # the known top half, exactly
        assert g[:14 * 28] == bytes(image[:14 * 28])
    assert len(set(got)) == 3  # three different completions
    np.save(tmp_path / "d.npy", image.reshape(1, 28, 28))
    subprocess.run([binary(), "complete", "--model", MNIST, "--images", str(tmp_path / "d.npy"),
                    "--index", "0", "--keep-rows", "14", "--samples", "3", "--seed", "5",
                    "--quiet", "-o", str(tmp_path / "g.png"), "--out-dir", str(tmp_path / "c")],
                   check=True)
    for k in range(3):
        want = np.asarray(Image.open(tmp_path / "c" / f"00000000-{k:02d}.png")).reshape(-1)
        assert bytes(want) == got[k], k
    # a painted mask: the left half known
    mask = np.zeros((28, 28), np.uint8)
    mask[:, :14] = 1
    status, events = mnist.stream("/api/complete", {"image": b64(image), "mask": b64(mask.reshape(-1)),
                                                    "samples": 2})
    for g in images_of(events, 784):
        g = np.frombuffer(g, np.uint8).reshape(28, 28)
        assert (g[:, :14] == image.reshape(28, 28)[:, :14]).all()


def test_score_is_the_commands_score(mnist, tmp_path):
    image = digit(3)
    status, r = mnist.post("/api/score", {"image": b64(image)})
    assert status == 200
    np.save(tmp_path / "d.npy", image.reshape(1, 28, 28))
    out = subprocess.run([binary(), "score", "--model", MNIST, "--images", str(tmp_path / "d.npy"),
                          "--json", "--quiet"], check=True, capture_output=True, text=True).stdout
    bpd = json.loads(out)["per_image"][0]
    assert abs(r["bits_per_dim"] - bpd) < 1e-9, (r, bpd)


@pytest.mark.parametrize("path,body,words", [
    ("/api/sample", "{", "not valid JSON"),
    ("/api/sample", "[1, 2]", "JSON object"),
    ("/api/sample", "[" * 100 + "]" * 100, "deeper"),
    ("/api/sample", {"n": 0}, "n must be"),
    ("/api/sample", {"n": 65}, "n must be"),
    ("/api/sample", {"n": 2.5}, "n must be"),
    ("/api/sample", {"n": "4"}, "n must be"),
    ("/api/sample", {"seed": -1}, "seed must be"),
    ("/api/sample", {"seed": 18446744073709551616}, "seed must be"),
    ("/api/sample", {"n": 2, "path": "/etc/passwd"}, "unknown field"),
    ("/api/complete", {"samples": 2}, "missing field"),
    ("/api/complete", {"image": 5}, "base64 string"),
    ("/api/complete", {"image": "####"}, "not base64"),
    ("/api/complete", {"image": "AAA"}, "multiple of 4"),
    ("/api/complete", {"image": b64(bytes(39))}, "holds 39 bytes"),
    ("/api/complete", {"image": b64(bytes(41))}, "holds 41 bytes"),
    ("/api/complete", {"image": b64(bytes(40)), "keep_rows": 9}, "keep_rows must be"),
    ("/api/complete", {"image": b64(bytes(40)), "keep_rows": 5}, "nothing to complete"),
    ("/api/complete", {"image": b64(bytes(40)), "mask": b64(bytes(40)), "keep_rows": 1}, "not both"),
    ("/api/complete", {"image": b64(bytes(40)), "mask": b64(bytes(12))}, "mask holds 12"),
    ("/api/complete", {"image": b64(bytes(40)), "samples": 65}, "samples must be"),
    ("/api/score", {"image": b64(bytes(40)), "samples": 2}, "unknown field"),
    ("/api/sample", {"temperature": 0}, "temperature must be a finite number above 0"),
    ("/api/sample", {"temperature": -0.5}, "temperature must be"),
    ("/api/sample", {"temperature": "0.7"}, "temperature must be"),
    ("/api/sample", {"temperature": 1e-50}, "which is 0 as a float"),
    ("/api/complete", {"image": b64(bytes(40)), "temperature": 1e39}, "which is infinite"),
    ("/api/score", {"image": b64(bytes(40)), "temperature": 0.7}, "unknown field"),
])
def test_bad_requests_are_400_with_a_reason(small, path, body, words):
    status, err = small.post(path, body)
    assert status == 400, err
    assert words in err["error"], err


def answer_while_sending(sock, head, byte=b"x"):
    """The server's whole answer to `head`, sent on `sock`, while this client goes on sending a
    byte whenever nothing came for half a second: a server that waited for the end of a body, or
    for the client to close, would never answer (no clock decides the check; the 2 minutes are
    only a guard against a hang)."""
    import socket
    sock.sendall(head)
    sock.settimeout(0.5)
    answer = b""
    for _ in range(240):
        try:
            part = sock.recv(65536)
        except socket.timeout:
            try:
                sock.sendall(byte)
            except OSError:  # the server answered and closed: its answer is read next
                pass
            continue
        except ConnectionResetError:
            break
        if not part:
            break
        answer += part
    sock.close()
    return answer


def test_an_empty_body_says_so(small):
    import socket
    own = f"127.0.0.1:{small.port}"
    # no Content-Length: answered at once, not when the body ends (httplib read one until the
    # client closed, answering after its 10-s read timeout)
    sock = socket.create_connection((small.host, small.port), timeout=60)
    answer = answer_while_sending(sock, f"POST /api/sample HTTP/1.1\r\nHost: {own}\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 411") and b"needs its body's Content-Length" in answer, answer
    status, _, err = raw(small, "POST", "/api/sample", {"Host": own}, "")
    assert status == 400 and "the body is empty" in err["error"], err


def test_a_huge_body_is_refused(small):
    status, err = small.post("/api/sample", "{\"n\": 1, \"pad\": \"" + "x" * 70000 + "\"}")
    assert status == 413 and "error" in err


def test_small_model_completion_keeps_known_bytes(small):
    image = bytes(range(100, 140))
    status, events = small.stream("/api/complete", {"image": b64(image), "keep_rows": 2,
                                                    "samples": 5, "seed": 9})
    assert status == 200
    for g in images_of(events, 40):
        assert g[:16] == image[:16]  # 2 rows of 4 pixels of 2 channels


def test_a_temperature_gives_the_commands_images_whatever_it_is_merged_with(small, tmp_path):
    # requests at 0.7 and at 1 sent together (merged into one rollout where they overlap): each
    # gets the command's images for its seed and temperature
    image = bytes(range(100, 140))
    bodies = [("/api/sample", {"n": 5, "seed": 3, "temperature": 0.7}),
              ("/api/sample", {"n": 5, "seed": 3}),
              ("/api/complete", {"image": b64(image), "samples": 3, "seed": 2, "temperature": 0.7})]
    results = [None] * len(bodies)

    def send(i):
        results[i] = small.stream(*bodies[i])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (path, body), (status, events) in zip(bodies, results):
        assert status == 200 and done_of(events)["temperature"] == body.get("temperature", 1)
    got = [images_of(events, 40) for _, events in results]
    for i, temperature in ((0, "0.7"), (1, "1")):
        subprocess.run([binary(), "sample", "--model", SMALL, "-n", "5", "--seed", "3", "--quiet",
                        "--temperature", temperature, "--npy", str(tmp_path / f"s{i}.npy")],
                       check=True)
        assert [bytes(w) for w in np.load(tmp_path / f"s{i}.npy").reshape(5, 40)] == got[i], i
    assert got[0] != got[1]
    np.save(tmp_path / "d.npy", np.frombuffer(image, np.uint8).reshape(1, 5, 4, 2))
    subprocess.run([binary(), "complete", "--model", SMALL, "--images", str(tmp_path / "d.npy"),
                    "--index", "0", "--samples", "3", "--seed", "2", "--temperature", "0.7",
                    "--quiet", "--out-dir", str(tmp_path / "c")], check=True)
    for k in range(3):
        want = np.asarray(Image.open(tmp_path / "c" / f"00000000-{k:02d}.png")).reshape(-1)
        assert bytes(want) == got[2][k], k


def test_defaults_are_the_commands_and_the_pages(small, tmp_path):
    # one set of defaults (tarnn/jobs.h): the API's, the page's and `tarnn complete`'s agree
    info = json.loads(small.get("/api/info")[2])
    assert (info["default_samples"], info["default_seed"]) == (4, 0)
    image = bytes(range(100, 140))
    status, events = small.stream("/api/complete", {"image": b64(image)})
    assert status == 200
    got = images_of(events, 40)
    assert len(got) == info["default_samples"]
    np.save(tmp_path / "d.npy", np.frombuffer(image, np.uint8).reshape(1, 5, 4, 2))
    out = subprocess.run([binary(), "complete", "--model", SMALL, "--images", str(tmp_path / "d.npy"),
                          "--index", "0", "--quiet", "--json", "-o", str(tmp_path / "g.png"),
                          "--out-dir", str(tmp_path / "c")], check=True, capture_output=True)
    cmd = json.loads(out.stdout)
    assert (cmd["samples"], cmd["seed"]) == (info["default_samples"], info["default_seed"])
    for k in range(cmd["samples"]):  # the command's default mask (the top half) is the API's
        want = np.asarray(Image.open(tmp_path / "c" / f"00000000-{k:02d}.png")).reshape(-1)
        assert bytes(want) == got[k], k
    page = small.get("/")[2].decode()
    samples = re.search(r'<select id="samples">(.*?)</select>', page, re.S).group(1)
    assert re.findall(r"<option selected>(\d+)</option>", samples) == [str(info["default_samples"])]
    for seed in ("seed", "sample-seed"):
        want = f'id="{seed}" type="number" min="0" value="{info["default_seed"]}"'
        assert want in page, seed


def test_full_queue_is_503_and_a_client_that_leaves_frees_its_slot(tmp_path):
    s = Server(binary(), "--model", MNIST, "--threads", "1", "--max-queued", "1")
    # runs long enough to hold the queue while it is probed (two requests, a stats poll): 8
    # digits, a second or two in release; 2 in a sanitized build, where a digit takes 2 s (8 made
    # this test 76 s there). Its first event says it runs, whatever the machine's speed.
    n = 2 if os.environ.get("TARNN_TEST_SANITIZED") else 8
    try:
        # one runs, one waits; the third finds the queue full
        results = []
        running = threading.Event()
        def client(seed):
            c = s.connect()
            c.request("POST", "/api/sample", body=json.dumps({"n": n, "seed": seed}))
            r = c.getresponse()
            events = read_events(r)
            got = [next(events)] if r.status == 200 else []
            running.set()
            results.append((r.status, got + list(events)))
            c.close()
        first = threading.Thread(target=client, args=(1,))
        first.start()
        assert running.wait(120)  # its first event came: it runs
        second = threading.Thread(target=client, args=(2,))
        second.start()
        assert wait_for(lambda: json.loads(s.get("/api/stats")[2])["queued"] == 1)
        status, err = s.stream("/api/sample", {"n": 1, "seed": 3})
        assert status == 503 and "busy" in err["error"]
        first.join()
        second.join()
        assert sorted(st for st, _ in results) == [200, 200]
        # a client that reads one event and leaves: the server goes on serving others
        c = s.connect()
        c.request("POST", "/api/sample", body=json.dumps({"n": n, "seed": 4}))
        r = c.getresponse()
        assert next(read_events(r))[0] == "grow"
        c.close()
        status, events = s.stream("/api/sample", {"n": 1, "seed": 5})
        assert status == 200 and done_of(events)
        stats = json.loads(s.get("/api/stats")[2])
        assert stats["rejected"] == 1 and stats["requests_done"] >= 3
    finally:
        rc, out, _ = s.stop()
    assert rc == 0


def test_sigterm_ends_a_run_and_the_server_gracefully():
    # The SIGTERM comes while the run certainly runs, whatever the machine's speed: the server
    # raises it at itself at the run's first report (TARNN_TEST_INTERRUPT_AFTER,
    # docs/ENVIRONMENT.md), as `kill` would then; the run ends there, the server after it.
    s = Server(binary(), "--model", MNIST, "--threads", "1",
               env=dict(os.environ, TARNN_TEST_INTERRUPT_AFTER="0:TERM"))
    c = s.connect()
    c.request("POST", "/api/sample", body=json.dumps({"n": 32, "seed": 1}))
    r = c.getresponse()
    events = list(read_events(r))
    assert events[0][0] == "grow" and events[-1][0] == "error", [n for n, _ in events]
    assert "stopping" in events[-1][1]["error"], events[-1]
    out, err = s.proc.communicate(timeout=120)
    assert s.proc.returncode == 0 and "stopped (signal 15)" in out, (out, err)


def test_bad_command_lines_are_one_line_errors(small):
    for args, code, words in [
        (["--port", "70000"], 2, "--port"),
        (["--port", str(small.port)], 1, "cannot listen"),  # in use by the fixture's server
        (["--host", "203.0.113.7"], 1, "cannot listen"),  # not an address of this machine
        (["--max-queued", "0"], 2, "--max-queued"),
        (["--model", "/nonexistent"], 1, "/nonexistent"),
    ]:
        model = [] if "--model" in args else ["--model", SMALL]
        r = subprocess.run([binary(), "serve", *model, *args], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == code, (args, r.returncode, r.stderr)
        # one line: not even the "other machines can reach it" warning for an address not bound
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and words in lines[0], (args, r.stderr)


def test_clients_that_connect_while_the_server_is_stalled_are_all_served():
    # httplib's own listen backlog is 5: 64 clients connecting while the accept loop is starved
    # (here: the server stopped until all 64 are connected, which the kernel does for it while its
    # backlog has room) got connection resets before the backlog was widened
    s = Server(binary(), "--model", SMALL, "--threads", "1")
    results, lock = [], threading.Lock()
    connected = threading.Semaphore(0)

    def client(i):
        try:
            c = s.connect()
            c.connect()  # the handshake, done by the kernel while the server is stopped
            connected.release()
            c.request("POST", "/api/sample", body=json.dumps({"n": 2, "seed": i}))
            r = c.getresponse()
            status = r.status
            list(read_events(r))
            c.close()
        except OSError as e:
            status = repr(e)[:80]
            connected.release()
        with lock:
            results.append(status)

    try:
        os.kill(s.proc.pid, signal.SIGSTOP)
        threads = [threading.Thread(target=client, args=(i,)) for i in range(64)]
        for t in threads:
            t.start()
        for _ in threads:  # every client connected (or failed) while the server was stopped
            assert connected.acquire(timeout=120)
        os.kill(s.proc.pid, signal.SIGCONT)
        for t in threads:
            t.join()
    finally:
        os.kill(s.proc.pid, signal.SIGCONT)
        assert s.stop()[0] == 0
    assert results == [200] * 64, sorted(map(str, results))[:3]


@contextlib.contextmanager
def slow_clients(s, count, trickling, every, timeout):
    """`count` connections to `s` that send a request line and a header and then nothing, the
    first `trickling` of them a byte every `every` seconds; closed at the end."""
    import socket
    own = f"127.0.0.1:{s.port}"
    slow, stop = [], threading.Event()

    def trickle():
        while not stop.wait(every):
            for sock in slow[:trickling]:
                try:
                    sock.send(b"X")
                except OSError:
                    pass
    t = threading.Thread(target=trickle)
    try:
        for _ in range(count):
            sock = socket.create_connection((s.host, s.port), timeout=timeout)
            sock.sendall(f"POST /api/sample HTTP/1.1\r\nHost: {own}\r\n".encode())
            slow.append(sock)
        t.start()
        yield slow
    finally:
        stop.set()
        if t.is_alive():
            t.join()
        for sock in slow:
            sock.close()


def test_slow_clients_cannot_lock_others_out():
    """300 connections that send a request line and a header and then nothing, 100 of them a byte
    every 0.4 s (a pool of max_queued + 8 threads was held by about 72): normal clients are
    answered while every slow one is still held open (their deadline, an hour here, cannot have
    passed: no clock decides the check), and a declared 10 GB body is refused without waiting for
    it. Their deadline itself: test_slow_clients_are_closed_at_their_deadline."""
    import socket
    s = Server(binary(), "--model", SMALL, "--threads", "1", "--client-timeout", "3600")
    try:
        with slow_clients(s, 300, 100, 0.4, 60) as slow:
            for _ in range(8):
                status, body = s.post("/api/score", {"image": b64(bytes(40))})
                assert status == 200 and "bits_per_dim" in body
            for sock in slow:  # none was closed to make room
                sock.setblocking(False)
                try:
                    assert sock.recv(100) != b"", "a slow connection was closed"
                except BlockingIOError:
                    pass
                sock.setblocking(True)
            # a declared 10 GB body is refused at once: its bytes never come, the answer does
            sock = socket.create_connection((s.host, s.port), timeout=60)
            answer = answer_while_sending(sock, f"POST /api/sample HTTP/1.1\r\nHost: 127.0.0.1:"
                                          f"{s.port}\r\nContent-Length: 10000000000\r\n\r\n{{}}"
                                          .encode(), b"")
            assert answer.startswith(b"HTTP/1.1 413"), answer
        assert json.loads(s.get("/api/stats")[2])["requests_done"] >= 8
    finally:
        assert s.stop()[0] == 0


def test_slow_clients_are_closed_at_their_deadline():
    """Connections whose headers do not come within --client-timeout (here 1 s) are closed by the
    server, trickling a byte now and then or not: each sees its end (the 2 minutes of its socket's
    timeout only guard against a hang)."""
    s = Server(binary(), "--model", SMALL, "--threads", "1", "--client-timeout", "1")
    try:
        with slow_clients(s, 40, 20, 0.3, 120) as slow:
            for sock in slow:
                try:
                    while sock.recv(100):
                        pass
                except ConnectionResetError:
                    pass
    finally:
        assert s.stop()[0] == 0


def exchange(server, request, half_close=False):
    """Everything the server sends back for these bytes, until it closes; with half_close the
    client says it sends no more (shutdown(SHUT_WR), as nc -N does) before reading."""
    import socket
    sock = socket.create_connection((server.host, server.port), timeout=30)
    sock.sendall(request)
    if half_close:
        sock.shutdown(socket.SHUT_WR)
    answer = b""
    while True:
        part = sock.recv(65536)
        if not part:
            break
        answer += part
    sock.close()
    return answer


def test_pipelined_requests_are_refused_explicitly(small):
    """Two requests in one write: the first is answered with Connection: close, so the client
    knows the second was not taken (it was silently dropped)."""
    own = f"127.0.0.1:{small.port}"
    req = f"GET /api/info HTTP/1.1\r\nHost: {own}\r\n\r\n".encode()
    answer = exchange(small, req + req)
    assert answer.count(b"HTTP/1.1 200") == 1 and b"Connection: close" in answer


def test_a_client_that_half_closes_is_answered(small):
    """Issue 42: a client that shut its sending side after its request (nc -N) got 0 bytes back:
    httplib took the end of its input for a client gone, and wrote nothing."""
    own = f"127.0.0.1:{small.port}"
    answer = exchange(small, f"GET /api/info HTTP/1.1\r\nHost: {own}\r\n\r\n".encode(), True)
    assert answer.startswith(b"HTTP/1.1 200") and b'"height":5' in answer, answer[:200]
    body = json.dumps({"image": b64(bytes(40))}).encode()
    post = (f"POST /api/score HTTP/1.1\r\nHost: {own}\r\nContent-Length: {len(body)}\r\n\r\n"
            .encode() + body)
    answer = exchange(small, post, True)
    assert answer.startswith(b"HTTP/1.1 200") and b"bits_per_dim" in answer, answer[:200]
    body = json.dumps({"n": 2}).encode()  # a stream of events, to its end
    post = (f"POST /api/sample HTTP/1.1\r\nHost: {own}\r\nContent-Length: {len(body)}\r\n\r\n"
            .encode() + body)
    answer = exchange(small, post, True)
    assert answer.startswith(b"HTTP/1.1 200") and b"event: done" in answer, answer[:200]
    answer = exchange(small, f"GET /nowhere HTTP/1.1\r\nHost: {own}\r\n\r\n".encode(), True)
    assert answer.startswith(b"HTTP/1.1 404"), answer[:200]


def test_a_negative_content_length_is_400(small):
    """Issue 42: Content-Length: -1 got no answer (httplib read it as 2^64 - 1 bytes to skip)."""
    own = f"127.0.0.1:{small.port}"
    for length in ("-1", "12abc", "+5"):
        answer = exchange(small, f"POST /api/sample HTTP/1.1\r\nHost: {own}\r\n"
                                 f"Content-Length: {length}\r\n\r\n{{}}".encode())
        assert answer.startswith(b"HTTP/1.1 400") and b"Content-Length" in answer, answer[:300]


def test_long_non_ascii_fields_and_fields_given_twice(small):
    """Issue 42: a long non-ASCII field name was quoted cut inside a character, and the answer was
    a 500 with the JSON library's message; a field given twice was taken silently, the last one."""
    status, err = small.post("/api/sample", ('{"x' + "\u00e9" * 30 + '": 1}').encode())
    assert status == 400 and err["error"] == 'unknown field "x' + "\u00e9" * 20 + '..."', err
    status, err = small.post("/api/sample", '{"n": 1, "n": 3}')
    assert status == 400 and err["error"] == 'request: "n" is given twice', err
