"""Hosts that share nothing, on one machine: each a network namespace of its own on a
bridge (its own loopback, address and ports), with its own hostname, a hosts file that
names the others, and a tmpfs over the launcher's folder with its TMPDIR inside it (the
repository and the venv, wherever a clone lives, stay visible). The launcher (this
process) stays in the machine's namespace and reaches every host through the bridge."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Hosts:
    """Named hosts on one bridge; `run` starts a program on one of them."""

    def __init__(self, names: list[str], folder: Path, hidden: Path):
        tag = os.getpid() % 100000
        self.prefix = f"md{tag}"
        self.subnet = f"10.{128 + tag % 100}.{tag // 100 % 250}"
        self.bridge = f"{self.prefix}br"
        self.address = {name: f"{self.subnet}.{i + 2}" for i, name in enumerate(names)}
        self.names = names
        self.hidden = hidden
        self.hosts_file = folder / "hosts"
        self.hosts_file.write_text("127.0.0.1 localhost\n" + "".join(
            f"{ip} {name}\n" for name, ip in self.address.items()))
        self._procs: list[subprocess.Popen] = []

    def namespace(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    def up(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i, name in enumerate(self.names):
            ns, veth = self.namespace(name), f"{self.prefix}v{i}"
            _ip("netns", "add", ns)
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", veth, "master", self.bridge, "up")
            _ip("-n", ns, "addr", "add", f"{self.address[name]}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def prefix_for(self, name: str) -> list[str]:
        """The command prefix that runs a program on host `name`."""
        script = (f"hostname {name} && mount --bind {self.hosts_file} /etc/hosts && "
                  f"mount -t tmpfs tmpfs {self.hidden} && mkdir {self.hidden}/tmp && "
                  f'TMPDIR={self.hidden}/tmp exec "$@"')
        return ["ip", "netns", "exec", self.namespace(name), "unshare", "--uts", "--mount",
                "--propagation", "private", "sh", "-c", script, name]

    def run(self, name: str, cmd: list[str], log: Path | None = None) -> subprocess.Popen:
        """`cmd` on host `name`, its output in `log` (or nowhere)."""
        env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
                   GRPC_DNS_RESOLVER="native")
        out = open(log, "wb") if log else subprocess.DEVNULL
        proc = subprocess.Popen([*self.prefix_for(name), *cmd], env=env, start_new_session=True,
                                stdout=out, stderr=subprocess.STDOUT)
        if log:
            out.close()
        self._procs.append(proc)
        return proc

    def down(self) -> None:
        for proc in self._procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        for name in self.names:
            subprocess.run(["ip", "netns", "del", self.namespace(name)], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)


@contextlib.contextmanager
def separate_hosts(names: list[str], folder: Path, hidden: Path):
    """`Hosts` up for the block, torn down after it (processes, namespaces, bridge)."""
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("unshare") is None:
        pytest.fail("hosts of their own need root, iproute2 (ip) and util-linux (unshare)")
    hosts = Hosts(names, folder, hidden)
    try:
        hosts.up()
        yield hosts
    finally:
        hosts.down()
