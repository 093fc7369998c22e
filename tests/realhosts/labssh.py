"""An OpenSSH server inside each of some lab hosts (netlab.py), so that
`minigluon-launch --launcher ssh` reaches them as it reaches real hosts: throwaway host and
client keys, one sshd per host listening on the host's address, port 22, each started with
`ip netns exec` and ended by its PID.

    ssh = LabSsh(tmp_path)
    ssh.serve(host)                   # sshd -D inside host, ready to accept
    args = ssh.options()              # --ssh-option IdentityFile=... for minigluon-launch
    ssh.close()                       # SIGTERM, then SIGKILL, by PID
"""
import os
import shutil
import subprocess
import time

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
PORT = 22
READY_WITHIN = 10.0               # seconds for an sshd to listen


class LabSsh:
    """The keys (in `folder`) and the sshd processes of one lab."""

    def __init__(self, folder):
        if not os.path.exists(SSHD) or shutil.which("ssh") is None:
            raise RuntimeError("needs OpenSSH: sshd and ssh (apt-get install openssh-server "
                               "openssh-client)")
        self.folder = folder
        self.servers = {}         # host name -> Popen of its sshd
        for key in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                            folder / key], check=True, timeout=30, stdin=subprocess.DEVNULL)
        shutil.copy(folder / "client_key.pub", folder / "authorized_keys")
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
        self._host_key = " ".join((folder / "host_key.pub").read_text().split()[:2])

    def serve(self, host):
        """Start an sshd inside `host` on its address and wait until it listens."""
        config = self.folder / f"sshd-{host.name}.conf"
        config.write_text(f"Port {PORT}\nListenAddress {host.address}\n"
                          f"HostKey {self.folder / 'host_key'}\n"
                          f"PidFile {self.folder / f'sshd-{host.name}.pid'}\n"
                          f"AuthorizedKeysFile {self.folder / 'authorized_keys'}\n"
                          "StrictModes no\nPasswordAuthentication no\n"
                          "KbdInteractiveAuthentication no\nUsePAM no\nLogLevel ERROR\n")
        with open(self.folder / "known_hosts", "a") as known:
            known.write(f"{host.address} {self._host_key}\n")
        log = open(self.folder / f"sshd-{host.name}.log", "ab")
        self.servers[host.name] = subprocess.Popen(
            host.argv(SSHD, "-D", "-e", "-f", str(config)), stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self._wait_listening(host)

    def _wait_listening(self, host):
        deadline = time.monotonic() + READY_WITHIN
        while f"{host.address}:{PORT} " not in host.run("ss", "-ltnH"):
            proc = self.servers[host.name]
            if proc.poll() is not None or time.monotonic() > deadline:
                said = (self.folder / f"sshd-{host.name}.log").read_text()[-500:]
                raise RuntimeError(f"sshd in {host.name} did not listen on {host.address}:"
                                   f"{PORT} within {READY_WITHIN:g} s (status "
                                   f"{proc.poll()}): {said}")
            time.sleep(0.05)

    def pids(self):
        return {proc.pid for proc in self.servers.values()}

    def options(self):
        """minigluon-launch arguments that make its ssh use these keys."""
        opts = [f"IdentityFile={self.folder / 'client_key'}", "IdentitiesOnly=yes",
                f"UserKnownHostsFile={self.folder / 'known_hosts'}"]
        return [arg for opt in opts for arg in ("--ssh-option", opt)]

    def close(self):
        """End every sshd by PID: SIGTERM, then SIGKILL after 5 s."""
        for proc in self.servers.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.servers.values():
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
