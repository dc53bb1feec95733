"""`kafkapy serve` as a user runs it: readiness line, config file, signals, exit codes."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.conftest import communicate, run_command

READY = re.compile(r"kafkapy ready: listening on (127\.0\.0\.1):(\d+) \(data dir (.+?), node id (\d+)")


def start(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], re.Match[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "serve", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 20
    for line in proc.stderr:
        m = READY.search(line)
        if m:
            return proc, m
        if time.monotonic() > deadline:
            break
    proc.kill()
    proc.wait(5)
    raise AssertionError("no readiness line")


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


@pytest.mark.timeout(60)
def test_serve_memory_ready_line_and_sigterm_with_idle_connection() -> None:
    proc, m = start("--listeners", "PLAINTEXT://127.0.0.1:0", "--memory")
    port = int(m.group(2))
    assert m.group(3) == "memory (temporary)"
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        started = time.monotonic()
        assert stop(proc) == 0
        assert time.monotonic() - started < 4


@pytest.mark.timeout(60)
@pytest.mark.parametrize("level", ["INFO", "WARNING"])
def test_ready_is_exactly_one_plain_line(level: str) -> None:
    """Scripts wait for one readiness line; a log-formatted copy of it, or none when logging
    is quieter, would break them."""
    proc, m = start("--listeners", "PLAINTEXT://127.0.0.1:0", "--memory", "--log-level", level)
    assert m.string.startswith("kafkapy ready: listening on 127.0.0.1:")
    assert stop(proc) == 0
    assert proc.stderr is not None
    assert "kafkapy ready" not in proc.stderr.read()


@pytest.mark.timeout(60)
def test_kraft_config_file_env_and_flags(tmp_path: Path) -> None:
    data = tmp_path / "data"
    props = tmp_path / "server.properties"
    props.write_text(
        "process.roles=broker,controller\nnode.id=1\n"
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n"
        "controller.listener.names=CONTROLLER\n"
        f"log.dirs={data}\nnum.network.threads=3\n"
    )
    proc, m = start("--config", str(props), "--listeners", "PLAINTEXT://127.0.0.1:0",
                    env={"KAFKAPY_NUM_PARTITIONS": "3", "KAFKAPY_OFFSETS_TOPIC_NUM_PARTITIONS": "1"})
    try:
        assert m.group(3) == str(data)
        assert (data / "meta.properties").exists()
    finally:
        assert stop(proc, signal.SIGINT) == 0
    assert (data / ".kafka_cleanshutdown").exists()


def test_bad_configuration_is_one_clear_error(tmp_path: Path) -> None:
    result = run_command(
        [sys.executable, "-m", "kafkapy", "serve", "--memory", "--override", "num.partitions=lots"],
    )
    assert result.returncode == 2
    assert "num.partitions" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_without_command() -> None:
    result = run_command([sys.executable, "-m", "kafkapy"])
    assert result.returncode == 0
    assert "serve" in result.stdout


def test_help_lists_every_command_with_its_own_summary() -> None:
    """The summaries `kafkapy --help` shows without importing a command are the commands' own."""
    import click

    from kafkapy.cli.main import LAZY_COMMANDS, cli

    ctx = click.Context(cli)
    for name, (_, summary) in LAZY_COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None, name
        assert command.get_short_help_str(limit=1000) == summary, name
    shown = run_cli("--help").stdout
    for name in [*LAZY_COMMANDS, "serve"]:
        assert re.search(rf"^  {name} +\S", shown, re.MULTILINE), name


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["serve", "--help"]])
def test_help_and_version_load_no_command_module(args: list[str]) -> None:
    """`kafkapy --help` loads click alone: no protocol codecs, rich, trio or broker."""
    code = (
        "import json, sys; from kafkapy.cli.main import main; main(sys.argv[1:]); "
        "print(json.dumps(sorted({m.split('.')[0] if not m.startswith('kafkapy.') "
        "else '.'.join(m.split('.')[:3]) for m in sys.modules})), file=sys.stderr)"
    )
    result = run_command([sys.executable, "-c", code, *args])
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stderr.strip().splitlines()[-1]))
    assert not loaded & {"trio", "rich", "construct", "confluent_kafka", "kafkapy.protocol", "kafkapy.server",
                         "kafkapy.cli.topics", "kafkapy.cli.common"}, loaded
    assert "click" in loaded


def test_a_command_loads_only_its_own_family() -> None:
    code = (
        "import json, sys; from kafkapy.cli.main import main; main(['topics', '--help']); "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('kafkapy.cli.'))), file=sys.stderr)"
    )
    result = run_command([sys.executable, "-c", code])
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stderr.strip().splitlines()[-1]))
    assert "kafkapy.cli.topics" in loaded
    assert not loaded & {"kafkapy.cli.chaos", "kafkapy.cli.dump_log", "kafkapy.cli.consume", "kafkapy.cli.produce"}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("http", [False, True])
def test_serve_loads_the_http_stack_only_with_the_http_listener(http: bool) -> None:
    """h11, prometheus_client and the pages are start-up time a node without `--http` (the
    default) does not pay; with it they are there."""
    code = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: print('MODULES ' + json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
        "from kafkapy.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))"
    )
    args = ["serve", "--memory", "--listeners", "PLAINTEXT://127.0.0.1:0", *(["--http", "0"] if http else [])]
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "kafkapy ready" in line:
                assert ("HTTP on http://" in line) is http
                break
        else:
            raise AssertionError("no readiness line")
        proc.terminate()
        _, rest = communicate(proc, timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, rest
    loaded = set(json.loads(rest.split("MODULES ", 1)[1].splitlines()[0]))
    http_stack = {"h11", "prometheus_client", "kafkapy.server.http.listener", "kafkapy.server.http.routes"}
    assert (http_stack <= loaded) if http else not (http_stack & loaded), sorted(http_stack & loaded)


def test_port_in_use_is_one_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_command(
            [sys.executable, "-m", "kafkapy", "serve", "--memory", "--listeners", f"PLAINTEXT://127.0.0.1:{port}"],
        )
    assert result.returncode == 1
    assert "cannot listen" in result.stderr
    assert "Traceback" not in result.stderr


def test_tls_listener_without_certificate_and_sasl_user_flag() -> None:
    result = run_command(
        [sys.executable, "-m", "kafkapy", "serve", "--memory", "--listeners", "SSL://127.0.0.1:0"],
    )  # fmt: skip
    assert result.returncode == 2
    assert "ssl.keystore.location" in result.stderr
    assert "Traceback" not in result.stderr
    bad = run_command(
        [sys.executable, "-m", "kafkapy", "serve", "--memory", "--listeners",
         "SASL_PLAINTEXT://127.0.0.1:0", "--sasl-user", "no-colon"],
    )  # fmt: skip
    assert bad.returncode == 2
    assert "NAME:PASSWORD" in bad.stderr


@pytest.mark.timeout(60)
def test_http_flag_serves_health_and_readiness_and_names_its_url() -> None:
    import urllib.request

    proc, m = start("--listeners", "PLAINTEXT://127.0.0.1:0", "--memory", "--http", "127.0.0.1:0")
    try:
        url = re.search(r", HTTP on (http://127\.0\.0\.1:\d+/)$", m.string.strip())
        assert url is not None, m.string
        for path, expected in (("healthz", b"ok\n"), ("readyz", b"ready\n")):
            with urllib.request.urlopen(url.group(1) + path, timeout=10) as response:
                assert (response.status, response.read()) == (200, expected)
    finally:
        assert stop(proc) == 0


@pytest.mark.timeout(60)
def test_http_port_in_use_is_one_clear_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_command(
            [sys.executable, "-m", "kafkapy", "serve", "--listeners", "PLAINTEXT://127.0.0.1:0",
             "--memory", "--http", f"127.0.0.1:{port}"],
        )
    assert proc.returncode == 1
    assert f"kafkapy: cannot listen on HTTP 127.0.0.1:{port}: Address already in use" in proc.stderr


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_command(
        [sys.executable, "-m", "kafkapy", *args],
        env={**os.environ, **(env or {})},
    )


def test_version() -> None:
    from importlib.metadata import version

    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"kafkapy {version('kafkapy')}"


@pytest.mark.parametrize("where", ["flag", "env"])
def test_bogus_log_level_is_a_usage_error(where: str) -> None:
    """`--log-level bogus` used to run at INFO; now it is refused before anything starts."""
    if where == "flag":
        result = run_cli("serve", "--memory", "--log-level", "bogus")
    else:
        result = run_cli("serve", "--memory", env={"KAFKAPY_LOG_LEVEL": "bogus"})
    assert result.returncode == 2
    assert "'bogus' is not one of" in result.stderr
    assert "kafkapy ready" not in result.stderr


def test_unknown_command_and_option_are_usage_errors() -> None:
    assert run_cli("no-such-command").returncode == 2
    result = run_cli("groups", "list", "--no-such-flag")
    assert result.returncode == 2
    assert "No such option" in result.stderr


CLIENT_COMMANDS = [
    ["topics", "list"], ["topics", "describe", "t"], ["topics", "create", "t"], ["topics", "delete", "t"],
    ["produce", "t"], ["consume", "t", "--exit-at-end"], ["groups", "list"], ["groups", "describe", "--group", "g"],
    ["configs", "describe", "--topic", "t"], ["cluster", "info"], ["cluster", "quorum"],
    ["acls", "list"],
    ["topics", "alter", "t", "--partitions", "2"], ["topics", "add-partitions", "t", "--partitions", "2"],
    ["configs", "alter", "--group", "g", "--add-config", "consumer.session.timeout.ms=50000"],
    ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest"], ["groups", "delete", "--group", "g"],
    ["groups", "delete-offsets", "--group", "g", "--topic", "t"], ["quotas", "describe"], ["users", "list"],
    ["acls", "create", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t"],
]


@pytest.mark.parametrize("command", CLIENT_COMMANDS, ids=" ".join)
def test_every_client_command_fails_clearly_without_a_broker(command: list[str]) -> None:
    """Nothing listening: one line naming the address, exit 1, within the client's connect
    timeout (the subprocess timeout only guards a hang; perf/cli_bench.py times it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = run_command(
        [sys.executable, "-m", "kafkapy", *command, "--bootstrap-server", f"127.0.0.1:{port}"],
        input=b"x\n", env={**os.environ, "KAFKAPY_PROFILE": os.devnull},
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines()[-1].startswith(f"kafkapy: cannot connect to 127.0.0.1:{port}")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", [*CLIENT_COMMANDS, ["dump-log", "f"], ["serve"], ["chaos"]], ids=" ".join)
def test_every_command_refuses_an_unknown_flag_with_exit_2(command: list[str]) -> None:
    result = run_cli(*command, "--no-such-flag")
    assert result.returncode == 2
    assert "No such option '--no-such-flag'" in result.stderr
    assert "Traceback" not in result.stderr


def test_data_dir_and_memory_exclude_each_other(tmp_path: Path) -> None:
    result = run_cli("serve", "--memory", "--data-dir", str(tmp_path))
    assert result.returncode == 2
    assert "exclude each other" in result.stderr


@pytest.mark.timeout(60)
def test_log_request_with_an_unknown_api_is_one_clear_line() -> None:
    proc = run_command(
        [sys.executable, "-m", "kafkapy", "serve", "--listeners", "PLAINTEXT://127.0.0.1:0",
         "--memory", "--log-request", "Produce,Fecth"],
    )
    assert proc.returncode == 2
    assert "kafkapy: kafkapy.log.requests: unknown API name(s) Fecth" in proc.stderr


def test_start_up_refuses_bad_values_and_names_the_file_line(tmp_path: Path) -> None:
    result = run_cli("serve", "--memory", "--override", "num.partitions=0")
    assert result.returncode == 2
    assert "invalid value 0 for num.partitions: must be at least 1" in result.stderr
    props = tmp_path / "server.properties"
    props.write_text("log.dirs=" + str(tmp_path / "d") + "\noffsets.topic.num.partitions=0\n")
    result = run_cli("serve", "--config", str(props))
    assert result.returncode == 2
    assert f"{props}:2: invalid value 0 for offsets.topic.num.partitions" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_key_warns_with_a_suggestion_and_starts(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafkapy", "serve", "--listeners", "PLAINTEXT://127.0.0.1:0", "--memory",
             "--override", "num.partitons=3", "--log-level", "WARNING"],
            stdout=subprocess.DEVNULL, stderr=err, text=True,
        )
        try:
            deadline = time.monotonic() + 20
            while "kafkapy ready" not in log.read_text():
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        finally:
            assert stop(proc) == 0  # type: ignore[arg-type]
    text = log.read_text()
    assert "WARNING kafkapy.broker.config: ignoring config num.partitons: kafkapy does not know it" in text
    assert "did you mean num.partitions?" in text


def test_data_dir_errors_in_plain_words(tmp_path: Path) -> None:
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("x")
    for where, words in [(a_file, f"{a_file} is a file"), (a_file / "sub", f"{a_file} is a file"),
                         (Path("/proc/kafkapy-data"), "inside /proc, a kernel file system")]:
        result = run_cli("serve", "--data-dir", str(where), "--listeners", "PLAINTEXT://127.0.0.1:0")
        assert result.returncode == 2, result.stderr
        assert words in result.stderr
        assert "Errno" not in result.stderr


def test_shell_completion_as_docs_cli_md_shows_it() -> None:
    """`eval "$(_KAFKAPY_COMPLETE=bash_source kafkapy)"` installs completion; it completes lazily
    loaded commands and their choices."""
    script = run_cli(env={"_KAFKAPY_COMPLETE": "bash_source"})
    assert script.returncode == 0, script.stderr
    assert "_kafkapy_completion()" in script.stdout
    words = run_cli(env={"_KAFKAPY_COMPLETE": "bash_complete", "COMP_WORDS": "kafkapy cluster node ",
                         "COMP_CWORD": "3"})
    assert words.stdout.split() == ["plain,kill", "plain,pause", "plain,resume", "plain,restart"]
    commands = run_cli(env={"_KAFKAPY_COMPLETE": "bash_complete", "COMP_WORDS": "kafkapy reass",
                            "COMP_CWORD": "1"})
    assert commands.stdout.split() == ["plain,reassign-partitions"]


def test_a_command_that_outlives_its_timeout_fails_with_its_state_and_python_stack() -> None:
    """A CLI start hung once for 30 s under CI load with no output: the failure now says what
    the child was doing. Here it stops itself (what a stray SIGSTOP does): stopped, and where."""
    stops_itself = "import os, signal\ndef wait_here():\n    os.kill(os.getpid(), signal.SIGSTOP)\nwait_here()"
    with pytest.raises(pytest.fail.Exception) as failed:
        run_command([sys.executable, "-c", stops_itself], timeout=2)
    report = str(failed.value)
    assert "still ran after 2 s; it was killed" in report
    assert "State:\tT (stopped)" in report
    assert "wait_here (<string>:3)" in report, report  # py-spy's dump of its Python stack
