"""The first code that runs inside the sandbox (trusted): set resource limits, drop root, exec the worker.

    python -I -S sandbox_init.py [--uid N --gid N] --limit NAME=VALUE ... -- COMMAND ...

Run as a script with the standard library only (not through the `envs` package), so nothing else is
imported before the exec. bubblewrap started it with CAP_SETUID/CAP_SETGID only (when the evaluator
is root); switching every uid to an unprivileged one clears those too, and bubblewrap's
no_new_privs keeps setuid binaries and file capabilities from giving any back.
"""

from __future__ import annotations

import os
import resource
import sys

_LIMITS = {
    "nofile": resource.RLIMIT_NOFILE,
    "nproc": resource.RLIMIT_NPROC,
    "fsize": resource.RLIMIT_FSIZE,
    "core": resource.RLIMIT_CORE,
}


def _parse(argv: list[str]) -> tuple[int | None, int | None, list[tuple[int, int]], list[str]]:
    if "--" not in argv:
        raise SystemExit("sandbox_init: expected -- COMMAND")
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    uid = gid = None
    limits = []
    it = iter(options)
    for flag in it:
        value = next(it, None)
        if value is None:
            raise SystemExit(f"sandbox_init: {flag} needs a value")
        if flag == "--uid":
            uid = int(value)
        elif flag == "--gid":
            gid = int(value)
        elif flag == "--limit":
            name, _, number = value.partition("=")
            limits.append((_LIMITS[name], int(number)))
        else:
            raise SystemExit(f"sandbox_init: unknown option {flag}")
    if not command:
        raise SystemExit("sandbox_init: no command")
    return uid, gid, limits, command


def main(argv: list[str]) -> None:
    uid, gid, limits, command = _parse(argv)
    for which, value in limits:
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))
    if uid is not None:
        gid = uid if gid is None else gid
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        if 0 in os.getresuid() or 0 in os.getresgid():
            raise SystemExit("sandbox_init: could not drop root")
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
