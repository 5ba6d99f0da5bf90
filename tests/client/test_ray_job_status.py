"""The Ray backend reads a job's status with one GET of the Jobs API (``/api/jobs/<id>``), without Ray: what each
answer means, from a stand-in HTTP server on loopback (the real cluster's answers are in test_ray_backend.py)."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from torchforce.client import Project
from torchforce.client.backends import ray as ray_backend
from torchforce.client.backends.ray import RayBackend

JOB = "tfcli-run-0123abcd"


class Dashboard(http.server.BaseHTTPRequestHandler):
    """Answers GET with the status and body that ``answers`` holds for its path."""

    answers: dict[str, tuple[int, str, str]] = {}

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        status, kind, body = self.answers.get(self.path, (404, "text/plain", "404: Not Found"))
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        """Quiet: no line on stderr for each request."""


@pytest.fixture
def dashboard() -> Iterator[tuple[str, dict[str, tuple[int, str, str]]]]:
    answers: dict[str, tuple[int, str, str]] = {}
    handler = type("Answering", (Dashboard,), {"answers": answers})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", answers
    finally:
        server.shutdown()
        server.server_close()


def backend(tmp_path: Path, address: str) -> RayBackend:
    project, _ = Project.init(tmp_path / "project")
    runtime = {"dashboard": f"http://{address}", "storage": str(tmp_path)}
    spec = {"type": "ray", "name": "lab", "address": address, "storage": str(tmp_path)}
    project.store.add_cluster("lab", spec, "attached", runtime)
    ray_backend._unreachable.clear()
    return RayBackend(project, "lab")


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        ((200, "application/json", '{"status": "RUNNING", "job_id": "02000000"}'), "RUNNING"),
        ((200, "application/json", '{"status": "SUCCEEDED"}'), "SUCCEEDED"),
        ((404, "text/plain", f"Job {JOB} does not exist"), None),  # Ray's word: no such job
        ((404, "text/plain", "404: Not Found"), "UNREACHABLE"),  # another server on the port: no word on the job
        ((401, "text/plain", "Unauthorized"), "UNREACHABLE"),  # a refused token
        ((500, "text/plain", "Internal Server Error"), "UNREACHABLE"),
        ((200, "application/json", '["RUNNING"]'), "UNREACHABLE"),  # JSON, but not a job
        ((200, "application/json", '{"job_id": "02000000"}'), "UNREACHABLE"),  # a job without a status
        ((200, "text/html", "<html>a proxy's page</html>"), "UNREACHABLE"),  # not JSON
    ],
)
def test_what_each_answer_of_the_jobs_api_means(tmp_path, dashboard, answer, status):
    address, answers = dashboard
    answers[f"/api/jobs/{JOB}"] = answer
    assert backend(tmp_path, address).job_status(JOB, fresh=True) == status


def test_a_port_that_does_not_speak_http_is_unreachable_not_a_traceback(tmp_path):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)

        def babble() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.recv(1024)
                connection.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

        thread = threading.Thread(target=babble, daemon=True)
        thread.start()
        assert backend(tmp_path, f"127.0.0.1:{listener.getsockname()[1]}").job_status(JOB, fresh=True) == "UNREACHABLE"
        thread.join(timeout=10)


def test_no_handle_is_no_job_and_asks_nothing(tmp_path, dashboard):
    address, answers = dashboard
    assert backend(tmp_path, address).job_status(None) is None
