"""`rag-position serve` and VLLMServer without vLLM: the command, the export, the errors.

A stand-in interpreter plays vLLM where a process must fail; a real one: test_vllm_server.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag_position import serving
from rag_position.cli import main
from rag_position.errors import ModelSpecError
from rag_position.serving import FORCE_PROCESSOR, ServerStartError, VLLMServer

pytestmark = pytest.mark.slow  # the embedded model is exported (once, cached) for vLLM
SET = "is set by rag-position serve itself"
ABBREVIATES = r"abbreviates --\S+, which rag-position serve sets"
PY = sys.executable


def test_the_embedded_model_is_exported_once_to_a_transformers_folder() -> None:
    folder, name = serving.model_folder("embedded")
    assert name == serving.EMBEDDED_SERVED_NAME
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 30
    assert (folder / "model.safetensors").stat().st_size > 100_000_000
    assert (folder / "tokenizer.json").is_file()
    assert "im_start" in (folder / "chat_template.jinja").read_text()
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert serving.model_folder("embedded")[0] == folder  # cached: not written again
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp


def test_the_command_passes_the_options_through() -> None:
    server = VLLMServer("embedded", port=8123, dtype="bfloat16", max_model_len=2048,
                        tensor_parallel_size=2, api_key="s3cret", extra_args=["--enforce-eager"],
                        vllm_python=PY)  # fmt: skip
    command = server.command()
    assert command[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    joined = " ".join(command)
    for part in ("--served-model-name smollm2-135m-instruct", "--host 127.0.0.1", "--port 8123",
                 "--dtype bfloat16", "--tensor-parallel-size 2", "--max-model-len 2048",
                 f"--logits-processors {FORCE_PROCESSOR}", "--enable-prefix-caching",
                 "--enable-prompt-tokens-details"):  # fmt: skip
        assert part in joined
    assert command[-1] == "--enforce-eager"
    for flag in ("prefix-caching", "prompt-tokens-details"):  # a user's --no- wins
        off = VLLMServer("embedded", port=8123, vllm_python=PY,
                         extra_args=[f"--no-enable-{flag}"]).command()  # fmt: skip
        assert f"--enable-{flag}" not in off and off[-1] == f"--no-enable-{flag}"
    assert server.spec == "openai:http://127.0.0.1:8123/v1/smollm2-135m-instruct"
    env = server.environment()
    assert env["PYTHONPATH"] == str(serving.PLUGIN_DIR) and env["HF_HUB_OFFLINE"] == "1"
    # the key reaches vLLM by its environment, never on the command line (`ps` shows that)
    assert env["VLLM_API_KEY"] == "s3cret" and "s3cret" not in joined
    assert (serving.PLUGIN_DIR / "rag_position_vllm.py").is_file()
    (free := VLLMServer("embedded", port=0, vllm_python=PY)).command()  # port 0: a free one
    assert free.port > 0 and f":{free.port}/v1/" in free.spec
    VLLMServer("embedded", extra_args=["--enforce-eager", "--max-num-seqs", "4"])  # unmanaged


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"port": 70000}, "port must be between 0 and 65535"),
        ({"dtype": "int3"}, "dtype must be one of"),
        ({"max_model_len": 0}, "max_model_len must be >= 1"),
        ({"tensor_parallel_size": 0}, "tensor_parallel_size must be >= 1"),
        ({"extra_args": ["--port", "9"]}, SET),  # flags the spec depends on
        ({"extra_args": ["--served-model-name=x"]}, SET),
        ({"extra_args": ["--logprobs-mode", "processed_logprobs"]}, SET),
        # vLLM's argparse reads ``--hos`` as ``--host``: it passed the check (issue 42)
        ({"extra_args": ["--hos", "0.0.0.0"]}, ABBREVIATES),
        ({"extra_args": ["--api-k=x"]}, ABBREVIATES),
        ({"extra_args": ["--max-model", "9"]}, ABBREVIATES),
    ],
)
def test_bad_options_are_refused_up_front(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        VLLMServer("embedded", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("hf:/nonexistent/model", "is not a folder"),
        ("openai:http://127.0.0.1:1/v1", "already a server"),
        ("gpt-4o", "cannot serve"),
        ("hf:{tmp}", r"no config\.json"),
    ],
)
def test_models_that_cannot_be_served_are_named(spec: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(ModelSpecError, match=message):
        serving.model_folder(spec.format(tmp=tmp_path))


def test_a_missing_vllm_is_said_before_the_export(monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve` spent about a minute exporting the model before saying vLLM was missing."""
    monkeypatch.setattr(serving, "model_folder", lambda *a: pytest.fail("exported before vLLM"))
    with pytest.raises(serving.VLLMNotInstalledError, match="--vllm-python names /nope"):
        VLLMServer("embedded", vllm_python="/nope").command()
    monkeypatch.setenv("RAG_POSITION_VLLM_PYTHON", "/nonexistent/python")
    with pytest.raises(serving.VLLMNotInstalledError, match="RAG_POSITION_VLLM_PYTHON names"):
        serving.find_vllm_python()


@pytest.mark.parametrize("host", ["0.0.0.0", "", "192.168.1.5", "::"])
def test_an_open_server_without_a_key_is_refused_unless_meant(host: str) -> None:
    """``--host 0.0.0.0`` without a key started an open server with no warning."""
    with pytest.raises(ValueError, match="without an API key"):
        VLLMServer("embedded", host=host, vllm_python=PY)
    VLLMServer("embedded", host=host, api_key="k", vllm_python=PY)
    VLLMServer("embedded", host=host, allow_open=True, vllm_python=PY)
    for loopback in ("127.0.0.1", "localhost", "::1"):
        VLLMServer("embedded", host=loopback, vllm_python=PY)


def test_a_failed_start_is_reported_with_the_server_s_output(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text(  # the exit after a moment: the server is asked for /health meanwhile
        "#!/bin/sh\necho 'RuntimeError: operator torchvision::nms does not exist'\n"
        "sleep 1\nexit 3\n"
    )
    fake.chmod(0o755)
    server = VLLMServer("embedded", port=0, vllm_python=fake, startup_timeout=60)
    with pytest.raises(ServerStartError, match="exited with code 3") as caught:
        server.start()
    assert "torchvision::nms" in str(caught.value)
    assert server.process is None
    with socket.socket() as taken:  # a taken port is named
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = VLLMServer("embedded", port=port, vllm_python=PY)
        with pytest.raises(ServerStartError, match=f"cannot serve on 127.0.0.1:{port}"):
            server.start()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--model", "hf:/nonexistent", "--vllm-python", PY], ["is not a folder"]),
        (["--vllm-python", "/nonexistent/python"], ["--vllm-python names /nonexistent/python"]),
        (["--host", "0.0.0.0", "--vllm-python", PY], ["--allow-open", "without an API key"]),
    ],
    ids=["bad-model", "no-vllm", "open-host"],
)
def test_the_cli_prints_one_line_errors(
    argv: list[str], says: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Each in one line, no traceback; serve leaves the signal handlers as it found them."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert main(["serve", *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and all(said in err for said in says), err
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    with pytest.raises(SystemExit) as exited:  # refused by argument parsing, before any load
        main(["serve", "--port", "70000", "--vllm-python", PY])
    assert exited.value.code == 2
    assert "argument --port: must be a port number from 0 to 65535" in capsys.readouterr().err


def test_arguments_after_a_double_dash_go_to_vllm(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, object] = {}

    def start(self: VLLMServer) -> VLLMServer:
        seen["command"] = self.command()
        raise ServerStartError("stopped here by the test")

    monkeypatch.setattr(VLLMServer, "start", start)
    code = main(
        ["serve", "--port", "0", "--vllm-python", PY, "--", "--enforce-eager", "--seed", "3"]
    )
    assert code == 2 and "stopped here by the test" in capsys.readouterr().err
    assert seen["command"][-3:] == ["--enforce-eager", "--seed", "3"]  # type: ignore[index]


def test_vllm_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    """vLLM runs in its own session; a parent killed outright still takes it down."""
    pid_file = tmp_path / "pid"
    fake = tmp_path / "python"  # plays vLLM: never ready, never exits by itself
    fake.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 600\n")
    fake.chmod(0o755)
    script = (  # a parent that ignores SIGTERM, which its children would inherit
        "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "from rag_position.serving import VLLMServer; "
        f"VLLMServer('embedded', port=0, vllm_python={str(fake)!r}).start()"
    )
    parent = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 120
    while not pid_file.is_file() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline and parent.poll() is None, "the fake vLLM never ran"
        time.sleep(0.2)
    child = int(pid_file.read_text())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20
    stat = Path(f"/proc/{child}/stat")
    while True:
        try:  # a zombie is dead too: whoever adopted it may not have reaped it yet
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            break
        if state in ("Z", "X"):
            break
        if time.monotonic() > deadline:
            os.kill(child, 9)
            raise AssertionError("the server outlived the process that started it")
        time.sleep(0.2)


@pytest.mark.parametrize(
    ("config", "step"),
    [
        ({"vocab_size": 262_144}, "512"),  # Gemma 3
        ({"text_config": {"vocab_size": 262_208}}, "511"),  # a multimodal config's text part
        ({"vocab_size": 49_152}, None),  # SmolLM2: vLLM's own 2,048 fits
        ({}, None),
    ],
)
def test_a_large_vocabulary_gets_short_steps_on_a_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: dict[str, object], step: str | None
) -> None:
    """Echo scoring computes a step's logits over the whole vocabulary: 2,048 tokens of Gemma
    3's 262,144 entries got vLLM's CPU worker killed (measured). And 32-token KV blocks."""
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = f"hf:{tmp_path}"
    monkeypatch.setattr(serving, "_has_nvidia_gpu", lambda: False)
    command = VLLMServer(spec, port=8123, vllm_python=PY).command()
    for flag, want in (("--max-num-batched-tokens", step), ("--block-size", "32")):
        assert (command[command.index(flag) + 1] if flag in command else None) == want
        given = VLLMServer(spec, port=8123, vllm_python=PY, extra_args=[f"{flag}=64"]).command()
        assert flag not in given and given[-1] == f"{flag}=64"  # the user's, alone
    monkeypatch.setattr(serving, "_has_nvidia_gpu", lambda: True)
    gpu = VLLMServer(spec, port=8123, vllm_python=PY).command()
    assert not {"--max-num-batched-tokens", "--block-size"} & set(gpu), gpu


@pytest.mark.parametrize(
    ("name", "value"), [("VLLM_USE_AOT_COMPILE", "0"), (serving.SPIN_ENV, serving.CPU_SPIN_SECONDS)]
)
def test_the_cpu_environment(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    """vLLM 0.32's AOT artifacts never load on a CPU (each start recompiled), its older cache
    does; its worker spins a core for 1 s after a message. Served tests' logs check both."""
    monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(serving, "_has_nvidia_gpu", lambda: False)
    assert VLLMServer("embedded").environment()[name] == value
    monkeypatch.setenv(name, "1")  # the user's choice stands
    assert VLLMServer("embedded").environment()[name] == "1"
    monkeypatch.delenv(name)
    monkeypatch.setattr(serving, "_has_nvidia_gpu", lambda: True)
    assert name not in VLLMServer("embedded").environment()


def test_a_config_the_bounded_reader_refuses_gives_no_vocabulary(tmp_path: Path) -> None:
    """``config.json`` is read like every trusted JSON file (issue 42): a FIFO is not waited
    on, nesting past the cap is not recursed into; the vocabulary is then unknown."""
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "config.json")
    start = time.monotonic()
    assert serving.vocab_size(fifo) is None and time.monotonic() - start < 5
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    assert serving.vocab_size(deep) is None
    assert serving.vocab_size(tmp_path / "missing") is None
    (tmp_path / "config.json").write_text('{"vocab_size": 262144}')
    assert serving.vocab_size(tmp_path) == 262_144
