"""Running ``erstwhile serve``: one process, or a supervisor and N worker processes.

One process serves REST (uvicorn), MCP and gRPC over one service. With
``server.workers`` > 1 the supervisor opens the store once (so migrations and the
marking of interrupted jobs happen in one place), binds the REST socket, and starts N
worker processes that each open their own service on the same database — SQLite's
WAL lets them read in parallel and serialises their writes; on PostgreSQL each has
its own pool. They accept REST connections from the one inherited socket, and gRPC
ones from a port they share with ``SO_REUSEPORT``, so the kernel spreads the
connections. A worker that dies after it was serving is replaced; one that dies before
it was serving stops the server, since its siblings would fail the same way.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event as EventType
from types import FrameType

import uvicorn

from erstwhile.adapters.grpc.server import address, port_unavailable, serving
from erstwhile.cli import output
from erstwhile.config import Settings, open_store_only
from erstwhile.config import open_memory as open_configured
from erstwhile.domain.errors import ErstwhileError, InvalidInput
from erstwhile.tuning import tune_process

log = logging.getLogger("erstwhile.serve")

STOP_SECONDS = 30.0
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def serve(settings: Settings, log_level: str) -> None:
    """Serves until SIGINT or SIGTERM, in ``settings.server.workers`` processes."""
    from erstwhile.adapters.rest_observe import configure_logging

    configure_logging(log_level)
    workers = settings.server.workers
    where = address(settings.server.host, settings.server.port)
    grpc_note = f"gRPC on port {settings.server.grpc_port}" if settings.server.grpc_port else None
    if workers == 1:
        _serve_here(settings, log_level, sockets=None, announce=where)
        return
    # migrations, and the marking of jobs a dead process left running, happen once here
    with open_store_only(settings):
        pass
    if settings.server.grpc_port:
        _check_free(settings.server.host, settings.server.grpc_port)
    listener = _bind(settings)
    announce = (
        f"erstwhile serving http://{where} and {grpc_note or 'gRPC off'} "
        f"in {workers} worker processes (auth {'on' if settings.auth.enabled else 'off'})"
    )
    supervisor = Supervisor(settings, log_level, listener, announce)
    try:
        supervisor.run()
    finally:
        listener.close()
    if supervisor.stopped_by == signal.SIGTERM:  # end as SIGTERM ends a process, as one does
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)


def _serve_here(
    settings: Settings,
    log_level: str,
    sockets: list[socket.socket] | None,
    announce: str | None,
    ready: EventType | None = None,
) -> None:
    """REST, MCP and gRPC in this process until a signal; everything stopped in order."""
    from erstwhile.adapters.rest import create_app

    try:
        with ExitStack() as running, _terminated_raises():
            # one service for REST, MCP and gRPC, closed after both servers have stopped
            memory = running.enter_context(open_configured(settings, background_jobs=True))
            grpc_note = "gRPC off"
            if settings.server.grpc_port:
                shared = sockets is not None  # a worker: siblings listen on the same port
                bound = running.enter_context(serving(memory.service, settings, shared=shared))
                grpc_note = f"gRPC on port {bound}"
            if announce is not None:
                output.print_note(
                    f"erstwhile serving http://{announce} and {grpc_note} "
                    f"(auth {'on' if settings.auth.enabled else 'off'})"
                )
            config = uvicorn.Config(
                create_app(memory.service, settings),
                host=settings.server.host,
                port=settings.server.port,
                log_config=None,
                access_log=False,
                server_header=False,
                log_level=log_level,
            )
            _Server(config, ready).run(sockets=sockets)
    except _Terminated:
        # both servers and the service are stopped: now end as SIGTERM ends a process
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)


class _Server(uvicorn.Server):
    """uvicorn's server, telling ``ready`` once it accepts connections."""

    def __init__(self, config: uvicorn.Config, ready: EventType | None) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.ready is not None:
            self.ready.set()


class _Terminated(Exception):
    """SIGTERM arrived; raised so that everything ``serve`` started is stopped in order."""


@contextmanager
def _terminated_raises() -> Iterator[None]:
    """Turns SIGTERM into :class:`_Terminated` for the block. uvicorn catches SIGTERM
    itself, shuts REST down, and raises it again once it returns; this handler is the
    one it raises it to, so gRPC and the service then stop before the process ends."""

    def raise_terminated(signum: int, frame: FrameType | None) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _bind(settings: Settings) -> socket.socket:
    """The REST listening socket every worker accepts from."""
    host, port = settings.server.host.strip("[]"), settings.server.port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError:
        raise InvalidInput(
            f"server.port: cannot listen on {address(host, port)} (in use, or not an address "
            "here); choose another with --port or [server] port"
        ) from None


def _check_free(host: str, port: int) -> None:
    """Workers share the gRPC port with SO_REUSEPORT, which would also share it with a
    stranger's listener that set it: refuse a port anything holds, before they start."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host.strip("[]"), port))
        except OSError:
            raise port_unavailable(address(host, port)) from None


def _worker(settings: Settings, log_level: str, listener: socket.socket, ready: EventType) -> None:
    """A worker process's life: its own service, serving from the shared socket."""
    from erstwhile.adapters.rest_observe import configure_logging

    tune_process()  # a fresh process (spawned), the server's own, with no database yet

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the group: the supervisor decides
    configure_logging(log_level)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_WorkerPid())
    _serve_here(settings, log_level, sockets=[listener], announce=None, ready=ready)


class _WorkerPid(logging.Filter):
    """Adds ``worker`` (the process id) to a worker's log lines: they interleave."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.worker = os.getpid()
        return True


@dataclass
class _Worker:
    process: BaseProcess
    ready: EventType  # set by the worker once it accepts connections


class Supervisor:
    """Starts the workers, announces the server once all accept connections, replaces
    one that dies after it was ready, and on SIGINT or SIGTERM stops them all (SIGTERM
    to each, SIGKILL after ``STOP_SECONDS``)."""

    def __init__(
        self, settings: Settings, log_level: str, listener: socket.socket, announce: str
    ) -> None:
        self.settings = settings
        self.log_level = log_level
        self.listener = listener
        self.announce = announce
        self.context = multiprocessing.get_context("spawn")  # no forked threads or locks
        self.workers: list[_Worker] = []
        self.announced = False
        self.stopping = False
        self.stopped_by: int | None = None

    def run(self) -> None:
        # The workers are the parallelism: a BLAS thread pool in each as well would put
        # N x cores threads on the cores (spawned workers inherit the environment).
        for name in BLAS_THREADS:
            os.environ.setdefault(name, "1")
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.workers = [self._start() for _ in range(self.settings.server.workers)]
            while not self.stopping:
                self._replace_dead()
                if not self.announced and all(w.ready.is_set() for w in self.workers):
                    output.print_note(self.announce)
                    self.announced = True
                time.sleep(0.1)
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _start(self) -> _Worker:
        ready = self.context.Event()
        process = self.context.Process(
            target=_worker,
            args=(self.settings, self.log_level, self.listener, ready),
            name="erstwhile-worker",
        )
        process.start()
        log.info("worker %s started", process.pid)
        return _Worker(process, ready)

    def _replace_dead(self) -> None:
        for index, worker in enumerate(self.workers):
            if worker.process.is_alive() or self.stopping:
                continue
            code = worker.process.exitcode
            if not worker.ready.is_set():
                raise WorkerFailed(
                    f"a worker process ended with status {code} before it was serving; "
                    "the log above says why"
                )
            log.error("worker %s ended with status %s; starting another", worker.process.pid, code)
            self.workers[index] = self._start()

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True
        self.stopped_by = signum

    def _stop_all(self) -> None:
        for worker in self.workers:
            if worker.process.is_alive():
                worker.process.terminate()
        deadline = time.monotonic() + STOP_SECONDS
        for worker in self.workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                log.error("worker %s did not stop in %.0f s: killed", worker.process.pid,
                          STOP_SECONDS)  # fmt: skip
                worker.process.kill()
                worker.process.join()


class WorkerFailed(ErstwhileError):
    """A worker could not start: the server stops rather than restart it in a loop."""

    code = "erstwhile.internal"
