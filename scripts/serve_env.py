#!/usr/bin/env python
"""Serve KernelRL's evaluation over HTTP (see envs/service/ for the API).

  KERNELRL_SERVICE_TOKEN=... python scripts/serve_env.py --device cuda --port 8000
  python scripts/serve_env.py --token-file tokens.txt --problems /path/to/KernelBench --levels 1 2
  python scripts/serve_env.py --insecure-no-auth            # local experiments only
  python scripts/serve_env.py --host 0.0.0.0 --ssl-certfile c.pem --ssl-keyfile k.pem   # public: sandbox required

Tokens: KERNELRL_SERVICE_TOKEN and/or --token-file (one token per line, '#' comments); every token is
a client with its own rate-limit bucket. Without a token the server refuses to start unless
--insecure-no-auth is given. Evaluation settings come from conf/eval/default.yaml (--eval-config),
overridden by --device/--size/--baseline/--workers. One server process: its evaluator owns the
worker processes, so run more servers (not uvicorn workers) to scale out, or use --backend ray.
Workers run in the OS sandbox (envs/worker/sandbox.py); on a non-loopback address it is required
(the server exits when bubblewrap cannot run) unless --allow-unsandboxed. Problems sent inline
(problem_source) are refused unless --allow-problem-source.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import logging
import os
import signal
import stat
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKEN_ENV = "KERNELRL_SERVICE_TOKEN"
MIN_TOKEN_LENGTH = 16
DEFAULT_CACHE = Path(os.environ.get("KERNELRL_CACHE", Path.home() / ".cache" / "kernelrl" / "verdicts.sqlite"))
log = logging.getLogger("kernelrl.service")


class _Stop(Exception):
    """SIGTERM: leave uvicorn and the evaluator through the normal shutdown path, then exit 0."""


def _port(text: str) -> int:
    """A TCP port: 0 (any free one) to 65535. asyncio does not refuse a larger number: it binds the number
    modulo 65536 (99999 listened on 34463) while uvicorn announces the number given."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0 to 65535, not {port}")
    return port


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=_port, default=8000)
    ap.add_argument(
        "--backend",
        choices=["local", "ray"],
        default="local",
        help="local: an Evaluator with worker processes on this machine; "
        "ray: envs.pool.RayEvaluationPool (actors on a Ray cluster)",
    )
    ap.add_argument("--pool-config", type=Path, help="PoolConfig YAML for --backend ray (e.g. address, num_actors)")
    ev = ap.add_argument_group("evaluation")
    ev.add_argument(
        "--problems", default="builtin", help="builtin, a problem file, a directory or a KernelBench checkout"
    )
    ev.add_argument("--levels", type=int, nargs="+", help="keep only these levels")
    ev.add_argument(
        "--eval-config",
        type=Path,
        default=ROOT / "conf" / "eval" / "default.yaml",
        help="EvalSettings YAML (default conf/eval/default.yaml)",
    )
    ev.add_argument("--device", choices=["cpu", "cuda", "auto"])
    ev.add_argument("--size", choices=["full", "small"])
    ev.add_argument("--baseline", choices=["inductor", "eager"])
    ev.add_argument("--workers", type=int, help="worker processes (per GPU)")
    ev.add_argument("--delta", type=float, default=None, help="reward shift (default 1.8, Makora)")
    ev.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"SQLite verdict cache (default {DEFAULT_CACHE})")
    ev.add_argument("--no-cache", action="store_true")
    ev.add_argument(
        "--allow-problem-source",
        action="store_true",
        help="also accept problems sent inline (problem_source); their code runs in the sandboxed "
        "worker like a candidate's. Off by default: problem_id only",
    )
    sec = ap.add_argument_group("access and limits")
    sec.add_argument("--token-file", type=Path, help=f"bearer tokens, one a line (also: ${TOKEN_ENV})")
    sec.add_argument("--insecure-no-auth", action="store_true", help="serve without authentication")
    sec.add_argument("--max-body-bytes", type=int, default=1 << 20, help="request body limit (default 1 MiB)")
    sec.add_argument("--rate", type=float, default=5.0, help="requests per second per client (<= 0: no limit)")
    sec.add_argument("--burst", type=int, default=50, help="requests a client may make at once")
    sec.add_argument("--max-concurrent", type=int, help="evaluations at once (default: the backend's workers)")
    sec.add_argument("--max-queue", type=int, default=64, help="evaluations waiting beyond those; more get 503")
    sec.add_argument(
        "--trust-proxy",
        metavar="IPS",
        help="honour X-Forwarded-For/-Proto from these proxy addresses (comma-separated; "
        "default: from nobody), so per-IP rate limits see the real client",
    )
    sec.add_argument(
        "--allow-unsandboxed",
        action="store_true",
        help="serve on a non-loopback address even without the workers' OS sandbox (bubblewrap); "
        "without this flag a public bind makes the sandbox required",
    )
    sec.add_argument("--ssl-certfile")
    sec.add_argument("--ssl-keyfile")
    ap.add_argument(
        "--graceful-timeout", type=float, default=30.0, help="seconds to let running requests finish on shutdown"
    )
    ap.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return ap.parse_args(argv)


def read_tokens(args: argparse.Namespace) -> list[str]:
    tokens = []
    if os.environ.get(TOKEN_ENV, "").strip():
        tokens.append(os.environ[TOKEN_ENV].strip())
    if args.token_file:
        try:
            text = args.token_file.read_text()
            mode = args.token_file.stat().st_mode
        except OSError as e:
            raise ValueError(f"{args.token_file}: cannot read the token file ({e})") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            log.warning("%s is readable by other users; chmod 600 it", args.token_file)
        tokens += [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        if not tokens:
            raise ValueError(f"{args.token_file}: holds no token")
    short = [t for t in tokens if len(t) < MIN_TOKEN_LENGTH]
    if short:
        raise ValueError(
            f"tokens must be at least {MIN_TOKEN_LENGTH} characters; make one with "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return list(dict.fromkeys(tokens))


class _CloseOnce:
    """The backend, closed once whether the app's shutdown or this script's `finally` gets there first."""

    def __init__(self, backend):
        self.backend, self._lock, self._closed = backend, threading.Lock(), False

    def evaluate(self, problem, answer):
        return self.backend.evaluate(problem, answer)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def sandbox_for_bind(settings, args: argparse.Namespace):
    """A public bind requires the workers' sandbox (sandbox=required, so that no worker starts without it)
    unless --allow-unsandboxed says otherwise; raises ValueError for sandbox=off on a public address."""
    if _is_loopback(args.host) or args.allow_unsandboxed:
        return settings
    if settings.sandbox == "off":
        raise ValueError(
            f"refusing to serve on {args.host} with sandbox=off: untrusted code would run without the "
            "OS sandbox; enable it (sandbox: auto or required) or pass --allow-unsandboxed"
        )
    return dataclasses.replace(settings, sandbox="required")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Imported after argument parsing so that --help and bad arguments answer fast.
    from omegaconf import OmegaConf

    from envs import EvalSettings, ProblemError, load_problem_set
    from envs.cache import SqliteCache
    from envs.evaluator import EvaluatorError
    from envs.service import BackendUnavailable, ServiceSettings, create_app, make_backend
    from envs.worker.sandbox import SandboxUnavailable
    from rewards import DEFAULT_DELTA, reward_function
    from rewards.kernel_reward import check_delta

    try:
        tokens = read_tokens(args)
        if not tokens and not args.insecure_no_auth:
            raise ValueError(
                f"no bearer token: set {TOKEN_ENV} or give --token-file "
                "(or --insecure-no-auth to serve without authentication)"
            )
        if tokens and args.insecure_no_auth:
            raise ValueError("--insecure-no-auth together with a token: pick one")
        if bool(args.ssl_certfile) != bool(args.ssl_keyfile):
            raise ValueError("give both --ssl-certfile and --ssl-keyfile")
        eval_cfg = OmegaConf.to_container(OmegaConf.load(args.eval_config), resolve=True) if args.eval_config else {}
        for key in ("device", "size", "baseline", "workers"):
            if getattr(args, key) is not None:
                eval_cfg[key] = getattr(args, key)
        eval_settings = EvalSettings.from_mapping(eval_cfg)
        eval_settings = sandbox_for_bind(eval_settings, args).hiding(
            str(args.token_file) if args.token_file else None, None if args.no_cache else str(args.cache)
        )
        pool_cfg = OmegaConf.to_container(OmegaConf.load(args.pool_config), resolve=True) if args.pool_config else None
        if pool_cfg is not None and args.backend != "ray":
            raise ValueError("--pool-config applies to --backend ray only")
        delta = DEFAULT_DELTA if args.delta is None else check_delta(args.delta)
        problems = load_problem_set(args.problems, args.levels)
        if not problems:
            raise ValueError(f"no problems in {args.problems!r} (levels={args.levels})")
    except (ValueError, OSError, ProblemError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not tokens:
        log.warning("serving WITHOUT authentication (--insecure-no-auth)")
    if not _is_loopback(args.host) and not args.ssl_certfile:
        log.warning(
            "listening on %s without TLS: bearer tokens travel in clear text; put a TLS proxy in "
            "front or give --ssl-certfile/--ssl-keyfile",
            args.host,
        )

    def on_sigterm(signum, frame):
        raise _Stop

    signal.signal(signal.SIGTERM, on_sigterm)
    import uvicorn

    backend = None
    try:
        cache = None if args.no_cache else SqliteCache(args.cache)
        log.info("starting the %s backend (%s)...", args.backend, eval_settings.device)
        backend = _CloseOnce(make_backend(args.backend, eval_settings, cache=cache, pool_config=pool_cfg))
        pool = getattr(backend.backend, "pool", None)
        if getattr(pool, "sandbox", True) is None:  # the local backend runs its workers without the sandbox
            log.warning(
                "workers run WITHOUT the OS sandbox: only the static analysis stands between "
                "untrusted code and this machine"
            )
        if args.allow_problem_source:
            log.warning("accepting problem_source: client-supplied problem code runs in the workers")
        validate = getattr(backend.backend, "validate_problems", None)
        if validate is not None:  # degenerate problems would reward trivial answers
            log.info("checking %d problems for degenerate outputs...", len(problems))
            validate(problems)
        # Threads that may sit in backend.evaluate at once: the local evaluator's worker count (more would
        # only queue inside it); the Ray pool queues and schedules across its actors itself.
        max_concurrent = args.max_concurrent or (pool.size if args.backend == "local" and pool else 32)
        settings = ServiceSettings(
            tokens=tuple(tokens),
            insecure_no_auth=args.insecure_no_auth,
            max_body_bytes=args.max_body_bytes,
            rate_per_second=args.rate,
            rate_burst=args.burst,
            max_concurrent_evaluations=max_concurrent,
            max_queued_evaluations=args.max_queue,
            default_baseline=eval_settings.baseline,
            allow_problem_source=args.allow_problem_source,
            backend_name=args.backend,
        )
        app = create_app(backend, problems, settings, reward_function(delta))
        # One process: uvicorn workers would each start their own evaluator and worker processes.
        config = uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            lifespan="on",
            log_level=args.log_level,
            timeout_graceful_shutdown=args.graceful_timeout,
            proxy_headers=bool(args.trust_proxy),
            forwarded_allow_ips=args.trust_proxy or None,
            ssl_certfile=args.ssl_certfile,
            ssl_keyfile=args.ssl_keyfile,
        )
        server = uvicorn.Server(config)
        server.run()  # uvicorn handles SIGINT/SIGTERM, runs the app's shutdown (closing the backend), then
        # re-raises the signal: SIGTERM lands in on_sigterm (_Stop), SIGINT as KeyboardInterrupt.
        if not server.started:
            return 1
    except (_Stop, KeyboardInterrupt):
        pass
    except (ValueError, BackendUnavailable, SandboxUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except EvaluatorError as e:
        print(f"error: the evaluator failed to start: {e}", file=sys.stderr)
        return 1
    finally:
        if backend is not None:
            backend.close()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
