"""Beam's Python job service as a stand-in for a cluster's job server.

Beam's stock service (`local_job_service_main`) runs every job on one SDK worker,
whatever `--direct_num_workers` the job asks for, and tells clients and workers to dial
`localhost`. This one runs the job on the worker count it asks for, can be reached from
other hosts (`--host`: the name or address the launcher and the workers dial), and with
`--pools` serves an EXTERNAL worker-pool endpoint of its own that starts the job's
workers in turn on several worker pools (one per host), so one job spreads over hosts.

    python deploy/local/job_service.py --port 8099 [--host NAME] \
        [--pool_port 50000 --pools host1:50000,host2:50000]
"""
import argparse
import itertools
import logging
import signal
import sys
import threading
from concurrent import futures

import grpc
from apache_beam.options.pipeline_options import DirectOptions
from apache_beam.portability.api import (beam_fn_api_pb2, beam_fn_api_pb2_grpc,
                                         beam_job_api_pb2)
from apache_beam.runners.portability import local_job_service
from apache_beam.runners.portability.fn_api_runner import fn_runner


class Job(local_job_service.BeamJob):
    """A job run on the worker count its options ask for."""

    def _invoke_runner(self):
        self.set_state(beam_job_api_pb2.JobState.RUNNING)
        options = self.pipeline_options()
        runner = fn_runner.FnApiRunner(provision_info=self._provision_info)
        # FnApiRunner reads the worker count only in run_pipeline (a Pipeline object);
        # a job service holds the proto, so the count is set the way run_pipeline does.
        # Options arrive as a protobuf Struct, where every number is a float.
        runner._num_workers = max(1, int(options.view_as(DirectOptions).direct_num_workers or 1))
        return runner.run_via_runner_api(self._pipeline_proto, options)


class JobService(local_job_service.LocalJobServicer):
    """The job service, bound on every interface and announcing `host`."""

    def __init__(self, host: str, staging_dir=None):
        super().__init__(staging_dir, beam_job_type=Job)
        self._host = host

    def get_bind_address(self):
        return "[::]"

    def get_service_address(self):
        return self._host


class PoolFanOut(beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolServicer):
    """An EXTERNAL worker pool that starts each worker on the next of several pools."""

    def __init__(self, pools: list[str]):
        self._stubs = [beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolStub(
            grpc.insecure_channel(address)) for address in pools]
        self._next = itertools.cycle(range(len(pools)))
        self._started: dict[str, int] = {}
        self._lock = threading.Lock()

    def StartWorker(self, request, context):
        with self._lock:
            index = next(self._next)
            self._started[request.worker_id] = index
        return self._stubs[index].StartWorker(request)

    def StopWorker(self, request, context):
        with self._lock:
            index = self._started.pop(request.worker_id, None)
        if index is None:
            return beam_fn_api_pb2.StopWorkerResponse()
        return self._stubs[index].StopWorker(request)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8099, help="job API port")
    parser.add_argument("--host", default="localhost",
                        help="the name or address of this host that others dial")
    parser.add_argument("--staging_dir", help="where staged artifacts go (default: a temp dir)")
    parser.add_argument("--pool_port", type=int, help="serve the worker-pool fan-out here")
    parser.add_argument("--pools", help="comma-separated worker-pool addresses (host:port)")
    args = parser.parse_args(argv)
    if bool(args.pool_port) != bool(args.pools):
        parser.error("--pool_port and --pools go together")
    service = JobService(args.host, args.staging_dir)
    port = service.start_grpc_server(args.port)
    fan_out = None
    if args.pools:
        fan_out = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(
            PoolFanOut(args.pools.split(",")), fan_out)
        fan_out.add_insecure_port(f"[::]:{args.pool_port}")
        fan_out.start()
    logging.info("job service on %s:%d%s", args.host, port,
                 f", worker pools {args.pools} behind port {args.pool_port}" if fan_out else "")
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    stopped.wait()
    if fan_out is not None:
        fan_out.stop(1)
    service.stop()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    sys.exit(main())
