#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`cmake --install` into a fresh prefix, and what it put there.

- the layout: bin/vramflow, the product plugin (never the test build, which
  carries the simulated KFD) in lib/criu, man pages, completion, the unit,
  docs, examples; the installed files name the prefix installed to;
- the man pages render without a single groff warning, and vramflow(1) has
  a section for every subcommand `vramflow --help` lists (so a new command
  cannot be left out);
- the completion files are what `vramflow completion` writes;
- `systemd-analyze verify` accepts the units without a warning: the service,
  the socket and the service the socket activates;
- the service's ExecStart, run as systemd would (its variables from the
  example environment file, a unix: address), receives named streams one
  after another, refuses a name that would escape, logs one line per stream
  and stops on SIGTERM with the exit status the unit counts as success; so
  does the socket-activated service's, under systemd-socket-activate (which
  passes a listening socket as systemd does).

usage: install_test.py BUILD_DIR
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

build = os.path.abspath(sys.argv[1])
failures = []


def check(ok, message):
    if not ok:
        failures.append(message)
    return ok


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


tmp = tempfile.mkdtemp(prefix="vf-install-")
prefix = os.path.join(tmp, "prefix")
inst = run(["cmake", "--install", build, "--prefix", prefix])
if inst.returncode != 0:
    sys.exit(f"cmake --install failed: {inst.stdout}{inst.stderr}")

installed = sorted(os.path.relpath(os.path.join(d, f), prefix) for d, _, fs in os.walk(prefix) for f in fs)
expected = [
    "bin/vramflow",
    "lib/criu/amdgpu_plugin.so",
    "share/man/man1/vramflow.1",
    "share/man/man7/vramflow-amdgpu-plugin.7",
    "share/bash-completion/completions/vramflow",
    "share/zsh/vendor-completions/_vramflow",
    "lib/systemd/system/vramflow-recv@.service",
    "lib/systemd/system/vramflow-recv@.socket",
    "lib/systemd/system/vramflow-recv-activated@.service",
    "share/doc/vramflow/LICENSE",
    "share/doc/vramflow/copyright",
    "share/doc/vramflow/README.md",
    "share/doc/vramflow/docs/LICENSING.md",
    "share/doc/vramflow/docs/PLUGIN.md",
    "share/doc/vramflow/examples/criu-default.conf",
    "share/doc/vramflow/examples/recv-main.env",
]
for path in expected:
    check(path in installed, f"not installed: {path}")
check(not any("test-plugin" in p or "criu-host" in p or "vramflow_tests" in p for p in installed),
      f"test builds installed: {installed}")
unexpected = [p for p in installed if p not in expected and not p.startswith("share/doc/vramflow/docs/")]
check(not unexpected, f"installed but not expected here: {unexpected}")
with open(os.path.join(prefix, "lib/criu/amdgpu_plugin.so"), "rb") as f:
    check(b"VRAMFLOW_SIM_KFD" not in f.read(), "the installed plugin is the test build (it knows VRAMFLOW_SIM_KFD)")

vramflow = os.path.join(prefix, "bin/vramflow")
version = run([vramflow, "--version"])
check(version.returncode == 0 and re.match(r"vramflow \d+\.\d+\.\d+", version.stdout), f"--version: {version.stdout}")

# Man pages: no warnings, the installed prefix's paths, a section per subcommand.
for page in ["share/man/man1/vramflow.1", "share/man/man7/vramflow-amdgpu-plugin.7"]:
    path = os.path.join(prefix, page)
    out = run(["man", "--warnings", "-l", path], env={**os.environ, "MANWIDTH": "80"})
    check(out.returncode == 0 and not out.stderr, f"man --warnings -l {page}: {out.stderr}")
    check(len(out.stdout) > 2000, f"{page} renders to {len(out.stdout)} bytes")
    text = open(path).read()
    check("@" not in re.sub(r"vramflow-recv@|[\w.-]+@[\w.-]+", "", text), f"{page}: an @VARIABLE@ left unreplaced")
    check(os.path.join(prefix, "lib/criu/amdgpu_plugin.so") in text, f"{page} does not name the installed plugin")
man1 = open(os.path.join(prefix, "share/man/man1/vramflow.1")).read()
sections = re.findall(r'^\.SS "([^"]+)"', man1, re.M)


def subcommands(path):
    text = run([vramflow, *path, "--help"]).stdout
    return re.findall(r"^  (\S+)\s", text.split("Subcommands:", 1)[1], re.M) if "Subcommands:" in text else []


commands = []
for top in subcommands([]):
    subs = subcommands([top])
    # A group of commands (criu, s3, bench) is documented per member; streamer's are modes of one.
    commands += [f"{top} {s}" for s in subs] if subs and top != "streamer" else [top]
check(len(commands) >= 14, f"only {len(commands)} commands found in --help")
for command in commands:
    plain = [s.replace("\\", "") for s in sections]
    check(any(s == command or s.startswith(command + " ") for s in plain),
          f"vramflow(1) has no section for `{command}` (sections: {sections})")

# Completion as installed is the program's own.
for shell, path in [("bash", "share/bash-completion/completions/vramflow"), ("zsh", "share/zsh/vendor-completions/_vramflow")]:
    want = run([vramflow, "completion", shell]).stdout
    check(open(os.path.join(prefix, path)).read() == want, f"installed {shell} completion differs from `vramflow completion {shell}`")

# The units.
unit_dir = os.path.join(prefix, "lib/systemd/system")
units = os.path.join(tmp, "units")
os.makedirs(units)
for name in ["vramflow-recv@.service", "vramflow-recv@.socket", "vramflow-recv-activated@.service"]:
    shutil.copy(os.path.join(unit_dir, name), units)
for instance in ["vramflow-recv@main.service", "vramflow-recv@main.socket", "vramflow-recv-activated@main.service"]:
    verify = run(["systemd-analyze", "verify", os.path.join(units, instance)],
                 env={**os.environ, "MANPATH": os.path.join(prefix, "share/man")})
    check(verify.returncode == 0 and not verify.stderr.strip(),
          f"systemd-analyze verify {instance}: {verify.stdout}{verify.stderr}")
socket_text = open(os.path.join(unit_dir, "vramflow-recv@.socket")).read()
check(re.search(r"^Service=vramflow-recv-activated@%i\.service$", socket_text, re.M) is not None,
      "the socket does not activate vramflow-recv-activated@%i.service")

stream = os.path.join(tmp, "data.vfs")
subprocess.run([vramflow, "gen", "--kind", "bf16", "--size", "1M", "-o", os.path.join(tmp, "data.bin")], check=True,
               capture_output=True)
subprocess.run([vramflow, "pack", os.path.join(tmp, "data.bin"), "-o", stream, "-q"], check=True, capture_output=True)


def run_exec_start(unit_name, socket_path, wrapper):
    """The unit's ExecStart as systemd would run it (under `wrapper`, the
    socket activation), receiving on unix:socket_path."""
    unit_text = open(os.path.join(unit_dir, unit_name)).read()
    check(f"ExecStart={vramflow} " in unit_text, f"{unit_name} does not run the installed binary")
    exec_line = re.search(r"^ExecStart=(.*)$", unit_text, re.M).group(1)
    success = set(re.search(r"^SuccessExitStatus=(.*)$", unit_text, re.M).group(1).split())
    state = os.path.join(tmp, "state-" + unit_name)
    os.makedirs(state)
    env = {"VRAMFLOW_RECV_LISTEN": "unix:" + socket_path, "STATE_DIRECTORY": state}
    for line in open(os.path.join(prefix, "share/doc/vramflow/examples/recv-main.env")):
        m = re.match(r"^(VRAMFLOW_RECV_OPTIONS)=(.*)$", line.strip())
        if m:
            env[m.group(1)] = m.group(2)
    argv = list(wrapper)
    for word in shlex.split(exec_line):  # ${VAR}: one word; $VAR: split at whitespace (systemd.service(5))
        m = re.fullmatch(r"\$\{(\w+)\}|\$(\w+)", word)
        if m and m.group(1):
            argv.append(env[m.group(1)])
        elif m:
            argv += env.get(m.group(2), "").split()
        else:
            argv.append(word)
    log = open(os.path.join(tmp, "journal-" + unit_name), "w+")
    service = subprocess.Popen(argv, stdout=log, stderr=log)
    for _ in range(100):
        if os.path.exists(socket_path):
            break
        time.sleep(0.05)
    for name, ok in [("a.vfs", True), ("b.vfs", True), ("../escape.vfs", False), ("a.vfs", False)]:
        sent = run([vramflow, "send", stream, "unix:" + socket_path, "--name", name, "-q"], timeout=60)
        check((sent.returncode == 0) == ok, f"{unit_name}: send --name {name}: exit {sent.returncode} {sent.stderr}")
    service.send_signal(signal.SIGTERM)
    code = service.wait(timeout=30)
    log.seek(0)
    journal = log.read()
    check(str(code) in success, f"{unit_name}: stopped by SIGTERM with exit status {code}, which the unit counts as "
                                f"a failure (SuccessExitStatus={' '.join(success)}); log:\n{journal}")
    check(sorted(os.listdir(state)) == ["a.vfs", "b.vfs"], f"{unit_name}: stored: {os.listdir(state)}")
    check(not os.path.exists(os.path.join(tmp, "escape.vfs")), f"{unit_name}: a stream escaped the state directory")
    stored_lines = [l for l in journal.splitlines() if l.startswith("vramflow recv: stored ")]
    check(len(stored_lines) == 2, f"{unit_name}: expected one line per stored stream, log:\n{journal}")
    check(all(len(l) < 300 for l in journal.splitlines()), f"{unit_name}: log lines too long:\n{journal}")


run_exec_start("vramflow-recv@.service", os.path.join(tmp, "recv.sock"), [])
activated = os.path.join(tmp, "activated.sock")
run_exec_start("vramflow-recv-activated@.service", activated, ["systemd-socket-activate", "-l", activated])

shutil.rmtree(tmp)
for failure in failures:
    print("FAIL:", failure)
print(f"{len(installed)} files installed and checked; {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
