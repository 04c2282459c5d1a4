"""`ltx-jax serve` (ltx_jax/serve) on the embedded model: every route in-process through Starlette's TestClient (one
pipeline for the module, one server per test on its own jobs folder), and the real command on a port: a request, a
real browser on its page (tests/serve_browser.py) and 20 clients' load of 100 jobs (tests/serve_load.py).

A TestClient used in a `with` block runs the app's lifespan, whose worker runs the jobs; one used without leaves the
jobs queued, as a server that has not started its worker (or has crashed) would."""

import io
import os
import socket
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import numpy as np
import pytest
from PIL import Image
from serve_browser import check_the_page_in_a_browser
from serve_case import (
    LONG,
    MODEL,
    POLL_S,
    SMALL,
    WAIT_S,
    command_line,
    finished,
    frames_of,
    free_port,
    polled,
    start_server,
    stop_server,
    wait_until_up,
)
from serve_load import check_load
from starlette.testclient import TestClient

from ltx_jax.cli import serve as serve_command
from ltx_jax.parallel import make_mesh
from ltx_jax.pipeline import LTXPipeline, Plan, Stage, flows
from ltx_jax.pipeline.stops import StepWatch
from ltx_jax.serve import Limits, Server, create_app, peers
from ltx_jax.serve.settings import Served, checker

LOAD = {"prompt": "a fox", "size": "32x32", "num_frames": 1, "num_inference_steps": 2}  # the smallest job there is


@pytest.fixture(scope="module", autouse=True)
def command(tmp_path_factory):
    """`ltx-jax serve` on a free port (the browser, the load and the module's last test use it), started before
    anything else of the module so that it loads and compiles while the tests before run."""
    folder = tmp_path_factory.mktemp("command")
    port, log = free_port(), folder / "serve.log"
    compile_sizes = ["--compile-size", "64x64x9", "32x32x1"]  # SMALL's size and LOAD's
    server = start_server(command_line(port, folder / "jobs", *compile_sizes), log)
    yield SimpleNamespace(process=server, port=port, log=log, jobs=folder / "jobs", url=f"http://127.0.0.1:{port}")
    stop_server(server)


@pytest.fixture
def served(command):
    """The command, once up."""
    with httpx.Client(base_url=command.url, timeout=WAIT_S) as http:
        wait_until_up(http, command.process, command.log)
    return command


@pytest.fixture(scope="module")
def pipe():
    return LTXPipeline.embedded(mesh=make_mesh(1))


def serving(pipe, folder, **options):
    return TestClient(create_app(Server.of(pipe, folder, model=MODEL, **options)))


@pytest.fixture
def client(pipe, tmp_path):
    with serving(pipe, tmp_path / "jobs") as client:
        yield client


def png(size=(64, 64)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 80, 20)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_progress_follows_the_plans_steps_across_chunks_substeps_and_stages():
    plan = Plan((Stage(description="1", downscale=2, sigmas=(1.0, 0.75, 0.5, 0.25, 0.0)),
                 Stage(description="2", downscale=1, sigmas=(0.9, 0.4, 0.0))))  # fmt: skip
    seen = []
    watch = StepWatch(plan, lambda step, steps: seen.append((step, steps)))
    frozen = SimpleNamespace(sigma=np.zeros(2, np.float32))  # a frozen stream runs at sigma 0
    # step 0 in two batch chunks, a substep between the plan's sigmas, step 2 skipped, then stage 2
    for sigma in (1.0, 1.0, 0.75, 0.6, 0.25, 0.9, 0.4):
        watch(SimpleNamespace(sigma=np.full(2, sigma, np.float32)), frozen)
    assert seen == [(0, 6), (0, 6), (1, 6), (1, 6), (3, 6), (4, 6), (5, 6)]


def test_routes_from_submission_to_content(client):
    assert client.get("/health").json() == {"status": "ok"}
    assert client.get("/v1/models").json()["data"][0] | {"description": ""} == {
        "id": MODEL, "object": "model", "created": 0, "owned_by": "ltx-jax", "flow": "one-stage", "description": "",
    }  # fmt: skip
    page = client.get("/")
    assert page.headers["content-type"].startswith("text/html")
    assert '<form id="form">' in page.text
    assert "https://" not in page.text  # nothing from a CDN

    job = client.post("/v1/videos", json=SMALL).json()
    assert job["id"].startswith("video_")
    assert job["status"] in ("queued", "in_progress")
    assert (job["size"], job["num_frames"], job["model"]) == ("64x64", 9, MODEL)
    job = finished(client, job["id"])
    assert (job["status"], job["progress"], job["error"]) == ("completed", 100, None)
    assert [listed["id"] for listed in client.get("/v1/videos").json()["data"]] == [job["id"]]
    content = client.get(f"/v1/videos/{job['id']}/content")
    assert content.headers["content-type"] == "video/mp4"
    assert frames_of(content.content) == (9, 64, 64)

    # as a form, waited for
    synced = client.post("/v1/videos/sync", data={k: str(v) for k, v in SMALL.items()})
    assert synced.headers["content-type"] == "video/mp4"
    assert frames_of(synced.content) == (9, 64, 64)
    assert client.get(f"/v1/videos/{synced.headers['x-video-id']}").json()["status"] == "completed"

    deleted = client.delete(f"/v1/videos/{job['id']}").json()
    assert deleted == {"id": job["id"], "object": "video.deleted", "deleted": True}
    assert client.get(f"/v1/videos/{job['id']}").status_code == 404
    for method, path in (("GET", "video_0"), ("GET", "video_0/content"), ("DELETE", "x")):
        missing = client.request(method, f"/v1/videos/{path}")
        assert missing.status_code == 404
        assert missing.json()["error"]["param"] == "video_id"


BAD_FIELDS = [  # (fields over SMALL, the field the 400 names, words of its message)
    ({"size": "64by64"}, "size", "WIDTHxHEIGHT"),
    ({"size": "80x64"}, "size", "multiple of 32"),  # the settings' own message
    ({"num_frames": 10}, "num_frames", "8k+1"),
    ({"num_frames": 9, "seconds": 1}, "seconds", "both given"),
    ({"num_inference_steps": 1}, "num_inference_steps", "at least 2"),
    ({"fps": -1}, "fps", "frame_rate must be positive"),
    ({"seed": 1.5}, "seed", "integer"),
    ({"seed": 2**64}, "seed", "less than"),
    ({"seconds": 1, "num_frames": None, "fps": 0}, "fps", "frame_rate must be positive"),
    ({"model": "sora-2"}, "model", MODEL),
    ({"flow": "distilled"}, "flow", "one-stage"),
    ({"guidance": {"video": {"skip_step": -1}}}, "guidance", "skip_step"),
    ({"guidance": {"video": {"cfg": 3}}}, "guidance.video.cfg", "Extra inputs"),
    ({"colour": "red"}, "colour", "Extra inputs"),
    ({"prompt": ""}, "prompt", "at least 1 character"),
    ({"num_frames": 1001}, "num_frames", "--max-frames"),
    ({"size": "2048x2048"}, "size", "--max-pixels"),
]


@pytest.mark.parametrize(("fields", "param", "words"), BAD_FIELDS, ids=[case[1] for case in BAD_FIELDS])
def test_a_bad_field_is_a_400_naming_it_and_nothing_is_queued(pipe, tmp_path, fields, param, words):
    client = serving(pipe, tmp_path, limits=Limits(max_frames=257, max_pixels=1024 * 1024))
    response = client.post("/v1/videos", json={**SMALL, **fields})
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["param"], error["type"]) == (param, "invalid_request_error")
    assert words in error["message"]
    assert client.get("/v1/videos").json()["data"] == []
    assert list(tmp_path.iterdir()) == []


def test_an_unreadable_image_is_refused_as_the_cli_refuses_it(pipe, tmp_path):
    client = serving(pipe, tmp_path)
    response = client.post("/v1/videos", data={"prompt": "a fox"}, files={"input_reference": ("x.png", b"not a png")})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "input_reference"
    assert "cannot be read as an image" in error["message"]
    assert str(tmp_path) not in error["message"]  # the server's own paths stay its own
    assert list(tmp_path.iterdir()) == []


def test_cancelling_mid_denoising_keeps_nothing_and_the_next_job_runs(client, tmp_path):
    job_id = client.post("/v1/videos", json=LONG).json()["id"]
    running = polled(client, job_id, lambda job: job["status"] == "in_progress" and job["progress"] > 0)
    assert running["progress"] < 100
    cancelled = client.delete(f"/v1/videos/{job_id}").json()
    assert cancelled["status"] == "cancelled"
    assert cancelled["progress"] < 100
    assert client.get(f"/v1/videos/{job_id}/content").status_code == 409
    assert sorted(path.name for path in (tmp_path / "jobs" / job_id).iterdir()) == ["job.json"]
    after = client.post("/v1/videos", json=SMALL).json()["id"]
    assert finished(client, after)["status"] == "completed"


def test_restart_keeps_finished_jobs_fails_the_running_ones_and_runs_the_queued(pipe, tmp_path):
    folder = tmp_path / "jobs"
    with serving(pipe, folder) as client:
        completed = client.post("/v1/videos", json=SMALL).json()["id"]
        assert finished(client, completed)["status"] == "completed"
        stopped = client.post("/v1/videos", json=LONG).json()["id"]
        polled(client, stopped, lambda job: job["progress"] > 0)
    # a shutdown stops the running job at its next step
    assert client.get(f"/v1/videos/{stopped}").json()["status"] == "failed"

    before = serving(pipe, folder)  # its worker never starts
    crashed = before.post("/v1/videos", json=SMALL).json()["id"]
    queued = before.post("/v1/videos", json={**SMALL, "seed": 5}).json()["id"]
    cancelled = before.post("/v1/videos", json=SMALL).json()["id"]
    assert before.delete(f"/v1/videos/{cancelled}").json()["status"] == "cancelled"
    taken, _ = before.app.state.server.store.next_job()  # as the worker does, and then the process dies
    assert taken.id == crashed

    with serving(pipe, folder) as client:
        statuses = {job["id"]: job["status"] for job in client.get("/v1/videos").json()["data"]}
        assert statuses == {completed: "completed", stopped: "failed", crashed: "failed", queued: statuses[queued],
                            cancelled: "cancelled"}  # fmt: skip
        assert client.get(f"/v1/videos/{crashed}").json()["error"]["code"] == "interrupted"
        assert frames_of(client.get(f"/v1/videos/{completed}/content").content) == (9, 64, 64)
        assert finished(client, queued)["status"] == "completed"
    assert sorted(path.name for path in folder.glob("*/*.mp4")) == ["video.mp4", "video.mp4"]


def test_the_api_key_is_wanted_on_every_route(pipe, tmp_path):
    client = serving(pipe, tmp_path, api_key="sesame")
    for path in ("/", "/health", "/v1/models", "/v1/videos"):
        assert client.get(path).status_code == 401
        assert client.get(path, headers={"Authorization": "Bearer open"}).status_code == 401
        assert client.get(path, headers={"Authorization": "Bearer sesame"}).status_code == 200
    assert client.post("/v1/videos", json=SMALL).status_code == 401
    assert client.get("/?key=nope").status_code == 401
    assert client.get("/?key=sesame").status_code == 200  # sets the cookie the page's own requests carry
    assert client.get("/v1/videos").status_code == 200


def test_an_image_upload_is_queued_with_its_image_a_full_queue_is_a_429_a_large_upload_a_413(pipe, tmp_path):
    client = serving(pipe, tmp_path, limits=Limits(max_queue=1, max_upload_bytes=1000))
    image = png()
    fields = {name: str(value) for name, value in SMALL.items()}
    queued = client.post("/v1/videos", data=fields, files={"input_reference": ("f.png", image)})
    assert queued.json()["status"] == "queued"  # no worker runs it
    full = client.post("/v1/videos", json=SMALL)
    assert (full.status_code, full.json()["error"]["type"]) == (429, "invalid_request_error")
    assert "--max-queue" in full.json()["error"]["message"]
    large = client.post("/v1/videos", data={"prompt": "a fox"}, files={"input_reference": ("big.png", png((512, 512)))})
    assert large.status_code == 413
    assert "--max-upload-mb" in large.json()["error"]["message"]
    job, submission = client.app.state.server.store.next_job()  # what the worker would run
    assert [(condition.frame_idx, condition.strength) for condition in submission.settings.images] == [(0, 1.0)]
    assert Path(submission.settings.images[0].image).read_bytes() == image
    assert Path(submission.settings.images[0].image).parent.name == job.id == queued.json()["id"]


def test_health_is_a_503_once_the_worker_has_died(pipe, tmp_path, monkeypatch):
    server = Server.of(pipe, tmp_path, model=MODEL)

    def disk_full():
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(server.store, "next_job", disk_full)
    with TestClient(create_app(server)) as client:
        deadline = time.monotonic() + WAIT_S
        while (health := client.get("/health")).status_code == 200 and time.monotonic() < deadline:
            time.sleep(POLL_S)
    assert health.status_code == 503
    assert "No space left on device" in health.json()["error"]["message"]


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--pipeline", "a2vid"], "cannot run the a2vid flow"),
        (["--pipeline", "t2a"], "cannot run the t2a flow yet"),
        (["--compile-size", "65x64x9"], "--compile-size 65x64x9: width=65"),
        (["--compile-size", "64x64x9", "--max-frames", "5"], "no request could have it"),
        (["--api-key", ""], "--api-key is empty"),
        (["--lora", "x.safetensors"], "--lora apply to runs on model files"),
        (["--jobs-dir", __file__], "is a file"),
        (["--port", "PORT IN USE"], "cannot be bound"),
        (["--port", "0"], "argument --port: 0 must be at least 1"),
        (["--port", "70000"], "argument --port: 70000 is above 65535"),
    ],
)
def test_the_command_refuses_bad_flags_before_loading(flags, words, capsys, no_model_building, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        flags = [str(taken.getsockname()[1]) if flag == "PORT IN USE" else flag for flag in flags]
        with pytest.raises(SystemExit) as exit_status:
            serve_command.main(["--jobs-dir", str(tmp_path), *flags])
    assert exit_status.value.code == 2
    assert words in capsys.readouterr().err


def test_the_serve_command_serves_a_video_on_a_port(served):
    with httpx.Client(base_url=served.url, timeout=WAIT_S) as http:
        assert "compiled 64x64, 9 frames" in served.log.read_text()
        job = http.post("/v1/videos", json=SMALL).json()
        job = finished(http, job["id"])
        assert job["status"] == "completed", job
        assert frames_of(http.get(f"/v1/videos/{job['id']}/content").content) == (9, 64, 64)


def test_a_browser_submits_from_the_page_watches_the_queue_cancels_and_plays_the_video(served, tmp_path):
    """Headless Chromium (tests/serve_browser.py); skipped only where Chromium is not installed."""
    artifacts = Path(os.environ.get("TEST_ARTIFACTS", tmp_path))
    check_the_page_in_a_browser(served.url, artifacts / "serve_page.png")


def test_20_clients_100_jobs_each_completes_once_and_memory_stays_flat(served):
    """tests/serve_load.py: on loopback, against the command's process."""
    check_load(served, LOAD, jobs=100, clients=20)


def test_a_follower_runs_what_process_0_announces_and_stops_where_it_stops(tmp_path, monkeypatch, caplog):
    """ltx_jax/serve/peers.py without processes: what `Leader` broadcasts, replayed to `follow` (each array of the
    shape and dtype the follower gives, as the collective needs), with a generation that only reports 4 steps."""
    sent = []
    monkeypatch.setattr(peers, "_broadcast", lambda values: sent.append(values.copy()) or values)
    monkeypatch.setattr(peers, "_signals_to_process_0", lambda: None)  # the test process keeps its handlers
    leader, image = peers.Leader(), tmp_path / "input.png"
    image.write_bytes(png())
    leader.announce("video_a", {**SMALL, "seed": 7}, image)
    leader.step(stop=False)
    leader.step(stop=True)  # stopped at its second forward
    leader.announce("video_b", SMALL, None)
    leader.idle()  # process 0 failed video_b alone, before its first forward
    leader.idle()
    leader.stop()

    def replay(values):
        message = sent.pop(0)
        assert (message.shape, message.dtype) == (values.shape, values.dtype)
        return message

    runs = []

    def generate(prompt, settings, *, negative_prompt, on_step):
        upload = Path(settings.images[0].image).read_bytes() if settings.images else None
        runs.append((prompt, settings.seed, settings.width, settings.num_frames, upload))
        for step in range(4):
            on_step(step, 4)

    monkeypatch.setattr(peers, "_broadcast", replay)
    flow = flows.get("one-stage")
    check = checker(Served(MODEL, flow, flow.defaults("embedded")), Limits())
    with caplog.at_level("INFO", "ltx_jax.serve.peers"):
        peers.follow(SimpleNamespace(generate=generate), check)
    assert sent == []
    assert runs == [("a red fox", 7, 64, 9, png()), ("a red fox", 10, 64, 9, None)]
    assert [record.getMessage() for record in caplog.records] == [
        "job video_a stopped by process 0", "job video_b left: process 0 went on without it",
        "process 0 stopped the server",
    ]  # fmt: skip
