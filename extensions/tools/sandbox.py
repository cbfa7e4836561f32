"""Run model-written Python in a sandboxed subprocess: ``await run_python(code, limits=SandboxLimits())``.

Each call gets a fresh empty working directory (removed afterwards), an empty environment and its own
session. The child (``sandbox_child.py``) enters a new network namespace, sets resource limits, drops to
an unprivileged uid of its own when started as root, and installs an audit hook that refuses processes,
sockets and file access outside its directory. This side enforces the wall-clock and output limits, and
on exit, timeout or cancellation kills the whole process group and, when it ran under its own uid, every
process left with that uid (a program that escaped the group with ``setsid`` too).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from extensions.errors import SandboxError

CHILD = Path(__file__).with_name("sandbox_child.py")
SETUP_FAILED = 125  # keep in sync with sandbox_child.SETUP_FAILED
UID_BASE, UID_SPAN = 1 << 30, 1 << 24  # per-run uids: far above real users, unlikely to repeat
NOBODY = 65534
READ_CHUNK = 65536
EXIT_POLL_S = 0.005


class SandboxLimits(BaseModel):
    """What one run may use. These are also the ``python_exec`` tool's config keys."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    wall_time_s: float = Field(10.0, gt=0)
    """Wall-clock seconds from start until the whole process group is killed."""
    cpu_time_s: int = Field(5, ge=1)
    """CPU seconds (RLIMIT_CPU); then the kernel stops the program with SIGXCPU."""
    memory_mb: int = Field(512, ge=64)
    """Address space in MiB (RLIMIT_AS); allocations past it raise MemoryError."""
    output_bytes: int = Field(8192, ge=1)
    """Bytes kept of stdout and of stderr each; writing more kills the program."""
    file_size_bytes: int = Field(1 << 20, ge=0)
    """Largest file the program may write (RLIMIT_FSIZE)."""
    open_files: int = Field(64, ge=16)
    """File descriptors the program may hold open (RLIMIT_NOFILE)."""
    processes: int = Field(16, ge=1)
    """Processes and threads (RLIMIT_NPROC); enforced only when started as root (per-run uid)."""


class SandboxResult(BaseModel):
    """What one run did."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    stdout: str
    """Standard output, at most ``output_bytes`` of it, decoded as UTF-8 (bad bytes replaced)."""
    stderr: str
    """Standard error, as ``stdout``."""
    exit_code: int
    """Exit status; negative means killed by that signal (-9: SIGKILL)."""
    timed_out: bool
    """True when the wall-clock or CPU time limit stopped the program."""
    killed_reason: str | None
    """One line saying which limit or sandbox rule stopped the program; None when it ended on its own terms."""
    duration_s: float
    """Wall-clock seconds from start to cleanup."""

    def to_text(self) -> str:
        """What the model sees: stdout, then stderr, then one status line."""
        parts = [_with_newline(self.stdout)] if self.stdout else []
        if self.stderr:
            parts.append("[stderr]\n" + _with_newline(self.stderr))
        if self.exit_code < 0:
            parts.append(f"[killed: {self.killed_reason}]")
        elif self.killed_reason:
            parts.append(f"[exit status {self.exit_code}: {self.killed_reason}]")
        elif not self.stdout and not self.stderr:
            parts.append(f"[exit status {self.exit_code}; nothing was printed: use print() to show results]")
        else:
            parts.append(f"[exit status {self.exit_code}]")
        return "".join(parts)

    def interpreter_text(self) -> str:
        """What an interpreter session would show: stdout, then the error's last line, if any.

        The code-fence format (``extensions/code_fence.py``) inserts this: a traceback becomes its
        last line (``ZeroDivisionError: division by zero``), a stopped program says which limit.
        """
        parts = [_with_newline(self.stdout)] if self.stdout else []
        if self.timed_out:
            parts.append(f"TimeoutError: {self.killed_reason or 'the program ran out of time'}")
        elif self.exit_code < 0 or self.killed_reason:
            parts.append(f"Killed: {self.killed_reason or f'signal {-self.exit_code}'}")
        elif self.exit_code != 0:
            lines = [line for line in self.stderr.splitlines() if line.strip()]
            parts.append(lines[-1] if lines else f"exit status {self.exit_code}")
        elif not self.stdout:
            parts.append("(nothing was printed: use print() to show results)")
        return "".join(parts).rstrip("\n")


async def run_python(code: str, *, limits: SandboxLimits, audit_hook: bool = True) -> SandboxResult:
    """Run ``code`` in a fresh sandbox and return its output; cancelling the call kills the program.

    ``audit_hook=False`` leaves only the kernel limits, for tests of those. Raises SandboxError only when
    the sandbox itself cannot be started; everything the code does is reported in the result.
    """
    ids = _sandbox_ids()
    workdir = tempfile.mkdtemp(prefix="longflow-sandbox-")
    if ids is not None:
        os.chown(workdir, ids.uid, ids.uid)
    settings = {
        "uid": None if ids is None else ids.uid,
        "memory_bytes": limits.memory_mb << 20,
        "cpu_time_s": limits.cpu_time_s,
        "file_size_bytes": limits.file_size_bytes,
        "open_files": limits.open_files,
        # RLIMIT_NPROC counts every process of a uid, so it only means something for the run's own uid
        "processes": limits.processes if ids is not None and ids.unique else None,
        "audit_hook": audit_hook,
    }
    started = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-I", "-S", "-u", "-X", "utf8", str(CHILD), json.dumps(settings)),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=workdir,
            env={"HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8"},
            start_new_session=True,
        )
    except OSError as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        raise SandboxError(f"could not start {sys.executable} for the sandbox: {exc}") from exc
    try:
        return await _supervise(proc, code, limits, started, ids)
    except BaseException:  # cancelled (the caller's timeout) or failed: nothing may outlive the call
        _kill_all(proc.pid, ids)
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(_exited(proc), timeout=5)
        raise
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def _supervise(
    proc: asyncio.subprocess.Process,
    code: str,
    limits: SandboxLimits,
    started: float,
    ids: RunAs | None,
) -> SandboxResult:
    """Feed the code, read both streams under the caps, stop at exit, timeout or overflow."""
    if proc.stdin is None or proc.stdout is None or proc.stderr is None:
        raise SandboxError("the sandbox process was started without pipes")
    proc.stdin.write(code.encode("utf-8", errors="surrogatepass"))
    proc.stdin.close()
    overflow = asyncio.Event()
    streams = {"stdout": bytearray(), "stderr": bytearray()}
    readers = [
        asyncio.create_task(_read_capped(proc.stdout, streams["stdout"], limits.output_bytes, overflow)),
        asyncio.create_task(_read_capped(proc.stderr, streams["stderr"], limits.output_bytes, overflow)),
    ]
    exited = asyncio.create_task(_exited(proc))
    overflowed = asyncio.create_task(overflow.wait())
    try:
        await asyncio.wait({exited, overflowed}, timeout=limits.wall_time_s, return_when=asyncio.FIRST_COMPLETED)
        ran_out = not exited.done() and not overflow.is_set()
        _kill_all(proc.pid, ids)  # also whatever the program left behind holding the pipes open
        await asyncio.wait({exited, *readers}, timeout=2.0)
    finally:
        for task in (*readers, exited, overflowed):
            task.cancel()
    exit_code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    stdout, stderr = (bytes(streams[name]).decode("utf-8", errors="replace") for name in ("stdout", "stderr"))
    if exit_code == SETUP_FAILED and stderr.startswith("[sandbox setup failed]"):
        raise SandboxError(stderr.strip())
    full = [name for name in ("stdout", "stderr") if len(streams[name]) >= limits.output_bytes]
    if overflow.is_set():
        reason: str | None = f"output limit {limits.output_bytes} bytes exceeded on {' and '.join(full)}"
    elif ran_out:
        reason = f"wall time limit {limits.wall_time_s:g}s exceeded"
    else:
        reason = _exit_reason(exit_code, stderr, limits)
    timed_out = reason is not None and ("wall time" in reason or "CPU time" in reason)
    return SandboxResult(
        stdout=stdout,
        stderr=stderr,
        exit_code=exit_code,
        timed_out=timed_out,
        killed_reason=reason,
        duration_s=round(time.monotonic() - started, 3),
    )


async def _exited(proc: asyncio.subprocess.Process) -> None:
    """Return once the main process has exited. (``proc.wait()`` also waits for the pipes to close,
    which a left-behind grandchild can hold open.)"""
    while proc.returncode is None:
        await asyncio.sleep(EXIT_POLL_S)


async def _read_capped(stream: asyncio.StreamReader, into: bytearray, cap: int, overflow: asyncio.Event) -> None:
    """Append up to ``cap`` bytes of ``stream`` to ``into``; set ``overflow`` and stop at the first byte past it."""
    while chunk := await stream.read(READ_CHUNK):
        room = cap - len(into)
        into += chunk[:room]
        if len(chunk) > room:
            overflow.set()
            return


def _exit_reason(exit_code: int, stderr: str, limits: SandboxLimits) -> str | None:
    """Name the limit or rule behind an exit the program made itself (or the kernel made for it)."""
    if exit_code < 0:
        number = -exit_code
        if number == signal.SIGXCPU:
            return f"CPU time limit {limits.cpu_time_s}s exceeded"
        if number == signal.SIGXFSZ:
            return f"file size limit {limits.file_size_bytes} bytes exceeded"
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        return f"signal {name}" + (" (segmentation fault)" if number == signal.SIGSEGV else "")
    if exit_code == 0:
        return None
    last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
    if last.startswith("MemoryError"):
        return f"memory limit {limits.memory_mb} MB exceeded"
    if "[Errno 24]" in last:
        return f"open file limit {limits.open_files} exceeded"
    if "[Errno 27]" in last:
        return f"file size limit {limits.file_size_bytes} bytes exceeded"
    if "can't start new thread" in last:
        return f"process/thread limit {limits.processes} exceeded"
    if "[sandbox] " in last:
        return "blocked by the sandbox: " + last.split("[sandbox] ", 1)[1]
    return None


class RunAs(NamedTuple):
    """The unprivileged user a run drops to (as uid and gid)."""

    uid: int
    unique: bool
    """True for a fresh per-run uid; False for the shared ``nobody``, which is never swept."""


def _sandbox_ids() -> RunAs | None:
    """Whom to run as, or None when not root. The uid is fresh per run when the id maps allow it."""
    if os.geteuid() != 0:
        return None
    candidate = UID_BASE + secrets.randbelow(UID_SPAN)
    if _mapped(candidate, "/proc/self/uid_map") and _mapped(candidate, "/proc/self/gid_map"):
        return RunAs(candidate, unique=True)
    return RunAs(NOBODY, unique=False)


def _mapped(ident: int, map_file: str) -> bool:
    try:
        lines = Path(map_file).read_text().splitlines()
    except OSError:
        return ident < 1 << 32
    return any(int(f[0]) <= ident < int(f[0]) + int(f[2]) for f in (line.split() for line in lines) if len(f) == 3)


def _kill_all(pid: int, ids: RunAs | None) -> None:
    """SIGKILL the run's process group and, when its uid was its own, every process with that uid."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if ids is not None and ids.unique:
        kill_user_processes(ids.uid)


def user_processes(uid: int) -> list[int]:
    """Pids of the live (non-zombie) processes whose real uid is ``uid``."""
    pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    return [pid for pid in pids if _live_uid(pid) == uid]


def kill_user_processes(uid: int) -> int:
    """SIGKILL every live process whose real uid is ``uid``; returns how many were signalled."""
    signalled = 0
    for _ in range(50):  # new ones can appear while we scan; RLIMIT_NPROC bounds how many
        found = user_processes(uid)
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        signalled += len(found)
        if not found:
            break
    return signalled


def _live_uid(pid: int) -> int | None:
    """The real uid of ``pid`` from /proc (owner bits there follow dumpability), or None if gone or a zombie."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if fields.get("State", "").strip().startswith(("Z", "X")):
        return None
    return int(fields["Uid"].split()[0]) if "Uid" in fields else None


def _with_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"
