"""The child side of the Python sandbox; ``extensions.tools.sandbox.run_python`` starts it, not a person.

Command line: ``python -I -S -u -X utf8 sandbox_child.py SETTINGS_JSON``, the code on stdin, the fresh
working directory as cwd, an empty environment. It starts as the caller's user (root in the tests) and:

1. reads the code from stdin, then points stdin at /dev/null;
2. enters a new network namespace (root: CLONE_NEWNET; others: CLONE_NEWUSER|CLONE_NEWNET) where permitted;
3. sets resource limits: address space, CPU seconds, file size, open files, processes, no core dumps;
4. as root, keeps directory fds on the standard library (it may sit under a 0700 home), then drops to the
   run's own unprivileged uid/gid, and sets no_new_privs;
5. forgets ctypes and disarms ``_posixsubprocess`` so nothing below can be bypassed from plain Python;
6. installs an audit hook refusing processes, sockets, signals to other processes, ctypes, gc
   introspection, writes outside the working directory and reads outside it and the standard library;
7. runs the code as ``__main__`` and prints its traceback without this file's frames.

The kernel steps (2-4) are the security boundary; the hook (5-6) turns attempts into clear error messages.
"""

from __future__ import annotations

import builtins
import json
import linecache
import os
import resource
import socket
import stat
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any

SETUP_FAILED = 125
"""Exit status when the sandbox could not be set up; stderr then starts with ``[sandbox setup failed]``."""
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_SET_NO_NEW_PRIVS = 38
CODE_FILENAME = "<code>"

SPAWN_EVENTS = frozenset(
    {"os.exec", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.system", "subprocess.Popen", "pty.spawn"}
)
INTROSPECTION_EVENTS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents"})
BLOCKED_IMPORTS = frozenset({"ctypes", "_ctypes", "_posixsubprocess"})
# event -> positions of the path arguments it writes to
WRITE_EVENTS = {
    "os.mkdir": (0,),
    "os.rmdir": (0,),
    "os.remove": (0,),
    "os.rename": (0, 1),
    "os.link": (0, 1),
    "os.symlink": (1,),
    "os.truncate": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.utime": (0,),
    "os.setxattr": (0,),
    "os.removexattr": (0,),
    "shutil.rmtree": (0,),
    "sqlite3.connect": (0,),
}
READ_EVENTS = frozenset({"os.listdir", "os.scandir"})
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
EXTRA_READ_ROOTS = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/usr/share/zoneinfo")


def main() -> None:
    settings = json.loads(sys.argv[1])
    code = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    try:
        read_roots = _isolate(settings)
    except OSError as exc:
        sys.stderr.write(f"[sandbox setup failed] {exc}\n")
        os._exit(SETUP_FAILED)
    if settings["audit_hook"]:
        sys.addaudithook(_make_hook(os.getcwd(), read_roots, os.getpid()))
    _run(code)


def _isolate(settings: dict[str, Any]) -> tuple[str, ...]:
    """Steps 2-5; returns the real paths the code may read besides its working directory."""
    import ctypes  # only here, before the code runs; removed from sys.modules below

    libc = ctypes.CDLL(None, use_errno=True)
    as_root = os.geteuid() == 0
    libc.unshare(CLONE_NEWNET if as_root else CLONE_NEWUSER | CLONE_NEWNET)  # best effort; the hook still refuses
    _set_limits(settings, as_root)
    read_roots = tuple(os.path.realpath(p) for p in sys.path if p) + EXTRA_READ_ROOTS
    if as_root and settings["uid"] is not None:
        kept = [(p, os.open(p, os.O_RDONLY | os.O_DIRECTORY)) for p in sys.path if os.path.isdir(p)]
        os.setgroups([])
        os.setgid(settings["uid"])
        os.setuid(settings["uid"])
        moved = {path: _reachable(path, fd) for path, fd in kept}
        sys.path[:] = list(moved.values())
        _repoint_packages({old: new for old, new in moved.items() if old != new})
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    del libc, ctypes
    for name in [m for m in sys.modules if m.split(".")[0] in BLOCKED_IMPORTS]:
        del sys.modules[name]
    if settings["audit_hook"]:
        import _posixsubprocess  # subprocess calls it after its audit event; direct calls would skip the hook

        _posixsubprocess.fork_exec = _refuse_spawn
    return read_roots


def _set_limits(settings: dict[str, Any], as_root: bool) -> None:
    cpu = settings["cpu_time_s"]
    limits = {
        resource.RLIMIT_AS: (settings["memory_bytes"],) * 2,
        resource.RLIMIT_CPU: (cpu, cpu + 1),
        resource.RLIMIT_FSIZE: (settings["file_size_bytes"],) * 2,
        resource.RLIMIT_NOFILE: (settings["open_files"],) * 2,
        resource.RLIMIT_CORE: (0, 0),
    }
    if settings["processes"] is not None:
        limits[resource.RLIMIT_NPROC] = (settings["processes"],) * 2
    for which, (soft, hard) in limits.items():
        current_hard = resource.getrlimit(which)[1]
        if not as_root and current_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        resource.setrlimit(which, (soft, hard))


def _reachable(path: str, fd: int) -> str:
    """``path`` if the dropped user can still list it, else the kept directory fd's /proc path."""
    try:
        os.listdir(path)
    except OSError:
        return f"/proc/self/fd/{fd}"
    os.close(fd)
    return path


def _repoint_packages(moved: dict[str, str]) -> None:
    """Point already-imported packages (``encodings``, ``json``...) at the moved paths for later submodules."""
    for module in list(sys.modules.values()):
        search = getattr(module, "__path__", None)
        if not isinstance(search, list):
            continue
        for i, entry in enumerate(search):
            for old, new in moved.items():
                if entry == old or entry.startswith(old + "/"):
                    search[i] = new + entry[len(old) :]


def _refuse_spawn(*args: object) -> None:
    raise PermissionError("[sandbox] starting processes is not allowed (_posixsubprocess.fork_exec)")


def _make_hook(workdir: str, read_roots: tuple[str, ...], own_pid: int) -> Callable[[str, tuple[Any, ...]], None]:
    """The audit hook. It uses only values captured here, so rebinding ``os`` functions does not re-route it.

    It runs inside the code's own process, so it is a message layer, not the boundary: the kernel steps are.
    """
    fspath, getcwd, lstat, readlink, is_link = os.fspath, os.getcwd, os.lstat, os.readlink, stat.S_ISLNK
    write_flags, write_events, read_events = WRITE_FLAGS, WRITE_EVENTS, READ_EVENTS
    spawn, introspection, blocked_imports = SPAWN_EVENTS, INTROSPECTION_EVENTS, BLOCKED_IMPORTS
    unix_family = socket.AF_UNIX
    readable, writable = (workdir, f"/proc/{own_pid}", *read_roots), (workdir, "/dev/null")

    def resolve(path: Any) -> str | None:
        """Absolute path with every symlink resolved; None for a file descriptor."""
        if isinstance(path, int):
            return None
        text = fspath(path if path is not None else ".")
        if isinstance(text, bytes):
            text = text.decode("utf-8", "surrogateescape")
        pending = (text if text.startswith("/") else getcwd() + "/" + text).split("/")[::-1]
        parts: list[str] = []
        hops = 0
        while pending:
            part = pending.pop()
            if part in ("", "."):
                continue
            if part == "..":
                parts = parts[:-1]
                continue
            candidate = "/" + "/".join([*parts, part])
            try:
                is_symlink = is_link(lstat(candidate).st_mode)
            except OSError:
                is_symlink = False
            if is_symlink and hops < 40:
                hops += 1
                target = readlink(candidate)
                parts = [] if target.startswith("/") else parts
                pending.extend(target.split("/")[::-1])
            else:
                parts.append(part)
        return "/" + "/".join(parts)

    def check(path: Any, writing: bool) -> None:
        real = resolve(path)
        if real is None:
            return
        for root in writable if writing else readable:
            if real == root or real.startswith(root + "/"):
                return
        verb = "writing" if writing else "reading"
        raise PermissionError(f"[sandbox] {verb} outside the working directory is not allowed: {real}")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            mode = args[1] or ""
            check(args[0], bool((args[2] or 0) & write_flags) or any(c in mode for c in "wax+"))
        elif event in read_events:
            check(args[0], False)
        elif event in write_events:
            for position in write_events[event]:
                check(args[position], True)
        elif event == "import":
            if args[0] in blocked_imports:
                raise ImportError(f"[sandbox] importing {args[0]} is not allowed")
        elif event in spawn:
            raise PermissionError(f"[sandbox] starting processes is not allowed ({event})")
        elif event == "socket.__new__" and args[1] == unix_family:
            return  # socketpair() for asyncio's event loop; connect/bind/sendto stay refused below
        elif event.startswith(("socket.", "syslog.")):
            raise PermissionError(f"[sandbox] network access is not allowed ({event})")
        elif event.startswith("ctypes."):
            raise PermissionError(f"[sandbox] ctypes is not allowed ({event})")
        elif event in introspection:
            raise PermissionError(f"[sandbox] {event} is not allowed")
        elif event in ("os.kill", "os.killpg") and (event == "os.killpg" or args[0] != own_pid):
            raise PermissionError(f"[sandbox] sending signals to other processes is not allowed ({event})")

    return hook


def _run(code: str) -> None:
    """Step 7: run ``code`` as a fresh ``__main__`` module with ``exit``/``quit`` (``-S`` leaves them out)."""
    linecache.cache[CODE_FILENAME] = (len(code), None, code.splitlines(keepends=True), CODE_FILENAME)
    module = types.ModuleType("__main__")
    sys.modules["__main__"] = module
    sys.argv = [CODE_FILENAME]
    builtins.exit = builtins.quit = sys.exit  # type: ignore[attr-defined]
    try:
        exec(compile(code, CODE_FILENAME, "exec"), module.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:  # the code's own error: show it as Python would, minus this file's frames
        report = traceback.TracebackException.from_exception(exc)
        report.stack = traceback.StackSummary.from_list([f for f in report.stack if f.filename != __file__])
        sys.stderr.write("".join(report.format()))
        sys.exit(1)


if __name__ == "__main__":
    main()
