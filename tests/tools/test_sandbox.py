"""The Python sandbox: each probe is contained and reports exactly which limit or rule stopped it."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from extensions.tools import sandbox
from extensions.tools.sandbox import SandboxLimits, SandboxResult, run_python, user_processes

LIMITS = SandboxLimits(wall_time_s=10, cpu_time_s=2)
AS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not AS_ROOT, reason="dropping to a per-run uid (and RLIMIT_NPROC) needs root")


def last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1]


async def run(code: str, limits: SandboxLimits = LIMITS, audit_hook: bool = True) -> SandboxResult:
    return await run_python(code, limits=limits, audit_hook=audit_hook)


async def wait_until(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def test_runs_code_and_returns_stdout() -> None:
    result = await run("import math\nprint(6 * 7)\nprint(math.comb(10, 3))")
    assert (result.stdout, result.stderr, result.exit_code, result.killed_reason) == ("42\n120\n", "", 0, None)
    assert result.to_text() == "42\n120\n[exit status 0]"
    assert result.duration_s < 5  # loose bounds throughout: the suite may share 2 cores with others


async def test_python_errors_are_shown_with_the_code_line() -> None:
    result = await run("x = 1\nprint(x / 0)")
    assert result.exit_code == 1 and result.killed_reason is None
    assert result.stderr == (
        "Traceback (most recent call last):\n"
        '  File "<code>", line 2, in <module>\n'
        "    print(x / 0)\n"
        "           ~~^~~\n"
        "ZeroDivisionError: division by zero\n"
    )
    assert result.to_text().endswith("[stderr]\n" + result.stderr + "[exit status 1]")


async def test_silence_and_exit_are_reported() -> None:
    assert (await run("pass")).to_text() == "[exit status 0; nothing was printed: use print() to show results]"
    assert (await run("print('bye'); exit(3)")).to_text() == "bye\n[exit status 3]"


async def test_infinite_loop_hits_the_cpu_limit() -> None:
    result = await run("while True:\n    pass", SandboxLimits(wall_time_s=20, cpu_time_s=1))
    assert (result.exit_code, result.killed_reason, result.timed_out) == (-24, "CPU time limit 1s exceeded", True)
    assert result.to_text() == "[killed: CPU time limit 1s exceeded]"
    assert result.duration_s < 10


async def test_sleeping_forever_hits_the_wall_limit() -> None:
    result = await run("import time\nprint('start')\ntime.sleep(60)", SandboxLimits(wall_time_s=1))
    assert (result.exit_code, result.killed_reason, result.timed_out) == (-9, "wall time limit 1s exceeded", True)
    assert result.to_text() == "start\n[killed: wall time limit 1s exceeded]"  # output before the kill is kept
    assert result.duration_s < 4


@pytest.mark.parametrize(
    "code", ["x = bytearray(1 << 30)", "chunks = []\nwhile True:\n    chunks.append(b'x' * (1 << 20))"]
)
async def test_memory_bomb_hits_the_memory_limit(code: str) -> None:
    result = await run(code, SandboxLimits(memory_mb=128))
    assert (result.exit_code, result.killed_reason) == (1, "memory limit 128 MB exceeded")
    assert last_line(result.stderr) == "MemoryError"
    assert result.duration_s < 5


@pytest.mark.parametrize(
    ("code", "event"),
    [
        ("import os\nwhile True:\n    os.fork()", "os.fork"),
        ("import subprocess\nsubprocess.run(['sh', '-c', 'echo hi'])", "subprocess.Popen"),
        ("import os\nos.system('echo hi')", "os.system"),
        ("import os\nos.execv('/bin/sh', ['sh'])", "os.exec"),
        ("import os\nos.posix_spawn('/bin/sh', ['sh'], {})", "os.posix_spawn"),
        ("import _posixsubprocess\n_posixsubprocess.fork_exec()", "_posixsubprocess.fork_exec"),
    ],
)
async def test_fork_bombs_and_subprocesses_are_refused(code: str, event: str) -> None:
    result = await run(code)
    reason = f"starting processes is not allowed ({event})"
    assert (result.exit_code, result.killed_reason) == (1, f"blocked by the sandbox: {reason}")
    assert last_line(result.stderr) == f"PermissionError: [sandbox] {reason}"


@needs_root
async def test_thread_bomb_hits_the_process_limit() -> None:
    code = "import threading, time\nfor _ in range(100):\n    threading.Thread(target=time.sleep, args=(9,), daemon=True).start()"
    result = await run(code, SandboxLimits(processes=8))
    assert (result.exit_code, result.killed_reason) == (1, "process/thread limit 8 exceeded")
    assert last_line(result.stderr) == "RuntimeError: can't start new thread"


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
async def test_flooding_output_is_capped_and_killed(stream: str) -> None:
    result = await run(f"import sys\nwhile True:\n    print('x' * 100, file=sys.{stream})")
    assert (result.exit_code, result.killed_reason) == (-9, f"output limit 8192 bytes exceeded on {stream}")
    assert len(getattr(result, stream)) == 8192
    assert result.duration_s < 3


async def test_writes_stay_inside_the_working_directory(tmp_path: Path) -> None:
    target = tmp_path / "escaped.txt"
    result = await run(
        "import os\nopen('notes.txt', 'w').write('ok')\nprint(os.getcwd(), os.listdir('.'))\n"
        f"open({str(target)!r}, 'w')"
    )
    workdir = result.stdout.split()[0]
    assert result.stdout == f"{workdir} ['notes.txt']\n"
    assert (
        result.killed_reason
        == f"blocked by the sandbox: writing outside the working directory is not allowed: {target}"
    )
    assert not target.exists() and not Path(workdir).exists()  # the working directory is removed afterwards


async def test_file_size_limit() -> None:
    code = "with open('big.bin', 'wb') as f:\n    f.write(b'x' * 5000)"
    result = await run(code, SandboxLimits(file_size_bytes=4096))
    assert (result.exit_code, result.killed_reason) == (1, "file size limit 4096 bytes exceeded")
    assert last_line(result.stderr) == "OSError: [Errno 27] File too large"


async def test_parent_environment_is_not_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGFLOW_SECRET", "hunter2")
    result = await run("import os\nprint(sorted(os.environ.items()))")
    workdir = result.stdout.split("'")[3]
    assert result.stdout == f"[('HOME', '{workdir}'), ('LANG', 'C.UTF-8'), ('TMPDIR', '{workdir}')]\n"
    environ = f"/proc/{os.getpid()}/environ"
    result = await run(f"import os\nassert os.getppid() == {os.getpid()}\nprint(open({environ!r}).read())")
    assert (
        result.killed_reason
        == f"blocked by the sandbox: reading outside the working directory is not allowed: {environ}"
    )
    assert "hunter2" not in result.stdout + result.stderr


async def test_home_directory_is_not_readable() -> None:
    home = os.path.realpath(Path.home())
    result = await run(f"import os\nprint(os.listdir(os.path.expanduser('~')))\nprint(os.listdir({home!r}))")
    assert result.stdout.startswith("[]\n")  # ~ is the empty working directory
    assert (
        result.killed_reason == f"blocked by the sandbox: reading outside the working directory is not allowed: {home}"
    )


async def test_sockets_are_refused() -> None:
    result = await run("import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(('1.1.1.1', 53))")
    assert result.killed_reason == "blocked by the sandbox: network access is not allowed (socket.__new__)"
    assert last_line(result.stderr) == "PermissionError: [sandbox] network access is not allowed (socket.__new__)"


async def test_asyncio_still_works() -> None:
    result = await run("import asyncio\nprint(asyncio.run(asyncio.sleep(0, result=7)))")
    assert result.to_text() == "7\n[exit status 0]"


async def test_deep_recursion_is_a_recursion_error() -> None:
    result = await run("def down(n):\n    return down(n + 1)\ndown(0)")
    assert (result.exit_code, result.killed_reason) == (1, None)
    assert last_line(result.stderr) == "RecursionError: maximum recursion depth exceeded"


async def test_exhausting_file_descriptors_hits_the_open_file_limit() -> None:
    result = await run("files = [open('/dev/null') for _ in range(10_000)]")
    assert (result.exit_code, result.killed_reason) == (1, "open file limit 64 exceeded")
    assert last_line(result.stderr) == "OSError: [Errno 24] Too many open files: '/dev/null'"


async def test_killing_the_parent_is_refused() -> None:
    result = await run("import os\nos.kill(os.getppid(), 9)")
    reason = "sending signals to other processes is not allowed (os.kill)"
    assert (result.exit_code, result.killed_reason) == (1, f"blocked by the sandbox: {reason}")


async def test_ctypes_is_refused_and_a_segfault_is_contained() -> None:
    result = await run("import ctypes\nctypes.string_at(0)")
    assert result.killed_reason == "blocked by the sandbox: importing ctypes is not allowed"
    result = await run("import faulthandler\nfaulthandler._sigsegv()")
    assert (result.exit_code, result.killed_reason) == (-11, "signal SIGSEGV (segmentation fault)")
    assert result.to_text() == "[killed: signal SIGSEGV (segmentation fault)]"


@needs_root
@pytest.mark.parametrize(
    ("code", "last"),
    [
        (
            "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=1)",
            "OSError: [Errno 101] Network is unreachable",
        ),
        ("import os\nos.kill(os.getppid(), 9)", "PermissionError: [Errno 1] Operation not permitted"),
        ("open('/etc/longflow-probe', 'w')", "PermissionError: [Errno 13] Permission denied: '/etc/longflow-probe'"),
        ("import os\nos.listdir('/root')", "PermissionError: [Errno 13] Permission denied: '/root'"),
    ],
)
async def test_kernel_layers_hold_without_the_audit_hook(code: str, last: str) -> None:
    result = await run(code, audit_hook=False)
    assert (result.exit_code, last_line(result.stderr)) == (1, last)
    assert not Path("/etc/longflow-probe").exists()


@needs_root
async def test_kernel_layers_contain_a_ctypes_segfault() -> None:
    result = await run("import ctypes\nctypes.string_at(0)", audit_hook=False)
    assert (result.exit_code, result.killed_reason) == (-11, "signal SIGSEGV (segmentation fault)")


@needs_root
async def test_real_fork_bomb_and_escaped_daemon_leave_nothing_behind() -> None:
    bomb = "import os\nprint(os.getuid(), flush=True)\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    result = await run(bomb, SandboxLimits(wall_time_s=3, cpu_time_s=3, processes=8), audit_hook=False)
    assert result.killed_reason in {"wall time limit 3s exceeded", "CPU time limit 3s exceeded"}
    assert user_processes(int(result.stdout.split()[0])) == []
    daemon = "import os, time\nprint(os.getuid(), flush=True)\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)"
    result = await run(daemon, audit_hook=False)
    assert result.exit_code == 0 and user_processes(int(result.stdout.split()[0])) == []


@needs_root
async def test_cancelling_kills_the_process_group_and_escapees(monkeypatch: pytest.MonkeyPatch) -> None:
    uid = sandbox.UID_BASE + sandbox.UID_SPAN + 4242  # outside the random range, so no other run has it
    monkeypatch.setattr(sandbox, "_sandbox_ids", lambda: sandbox.RunAs(uid, unique=True))
    code = "import os, time\nif os.fork() == 0:\n    os.setsid()\ntime.sleep(60)"
    task = asyncio.create_task(run(code, SandboxLimits(wall_time_s=30), audit_hook=False))
    await wait_until(lambda: len(user_processes(uid)) == 2, timeout=15)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert user_processes(uid) == []
    assert [p for p in Path(tempfile.gettempdir()).glob("longflow-sandbox-*") if p.stat().st_uid == uid] == []


def test_to_text_renders_each_outcome() -> None:
    def result(**fields: object) -> SandboxResult:
        base = {"stdout": "", "stderr": "", "exit_code": 0, "timed_out": False, "killed_reason": None, "duration_s": 0}
        return SandboxResult.model_validate({**base, **fields})

    assert result(stdout="4").to_text() == "4\n[exit status 0]"
    assert result(stdout="a\n", stderr="warn\n", exit_code=2).to_text() == "a\n[stderr]\nwarn\n[exit status 2]"
    assert result(exit_code=-9, killed_reason="wall time limit 10s exceeded").to_text() == (
        "[killed: wall time limit 10s exceeded]"
    )
    assert result(stderr="MemoryError\n", exit_code=1, killed_reason="memory limit 512 MB exceeded").to_text() == (
        "[stderr]\nMemoryError\n[exit status 1: memory limit 512 MB exceeded]"
    )
