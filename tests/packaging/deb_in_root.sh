#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs inside the clean Debian 12 root that tests/packaging/deb_test.sh makes.
# usage: deb_in_root.sh DEB [CRIU]
set -euo pipefail
deb=$1
criu=${2:-}
fail() { echo "deb_in_root: FAIL: $*" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive

apt-get install -y -q --no-install-recommends "$deb" >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; fail "apt-get install $deb"; }
! dpkg -s criu >/dev/null 2>&1 || fail "installing vramflow pulled in Debian's criu package"
version=$(vramflow --version)
[[ $version =~ ^vramflow\ [0-9]+\.[0-9]+\.[0-9]+ ]] || fail "vramflow --version: $version"
echo "deb_in_root: $version"
[ "$(man -w vramflow)" = /usr/share/man/man1/vramflow.1 ] || fail "man -w vramflow: $(man -w vramflow 2>&1)"
[ "$(man -w 7 vramflow-amdgpu-plugin)" = /usr/share/man/man7/vramflow-amdgpu-plugin.7 ] || fail "man -w 7 vramflow-amdgpu-plugin"
for page in vramflow "7 vramflow-amdgpu-plugin"; do
  # shellcheck disable=SC2086
  warnings=$(MANWIDTH=80 man --warnings $page 2>&1 >/dev/null)
  [ -z "$warnings" ] || fail "man $page: $warnings"
done
missing=$(ldd /usr/bin/vramflow /usr/lib/criu/amdgpu_plugin.so | grep "not found" || true)
[ -z "$missing" ] || fail "libraries the package does not depend on: $missing"
# libcurl is opened at run time (s3://), so ldd does not see it: the package must still pull it in.
# Against an endpoint nobody listens on, an upload gets as far as connecting.
head -c 1000 /dev/urandom >/tmp/s3-in
s3=$(env -i PATH="$PATH" AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=secret AWS_REGION=us-east-1 \
     AWS_ENDPOINT_URL=http://127.0.0.1:9 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
     vramflow pack /tmp/s3-in -o s3://bucket/key -q 2>&1 || true)
[[ $s3 == *"connect"* && $s3 != *libcurl* ]] || fail "s3:// without a server should fail to connect: $s3"
# Completion as bash-completion loads it on first use: `vramflow re<TAB>` offers recv.
offered=$(bash -c 'source /usr/share/bash-completion/bash_completion
                   __load_completion vramflow || exit 1
                   COMP_WORDS=(vramflow re); COMP_CWORD=1; COMP_LINE="vramflow re"; COMP_POINT=11
                   $(complete -p vramflow | sed "s/.*-F \([^ ]*\) .*/\1/") vramflow re vramflow
                   echo "${COMPREPLY[*]}"')
[ "$offered" = recv ] || fail "bash completion of 'vramflow re': '$offered'"

if [ -n "$criu" ]; then
  # CRIU 4.2's own libraries (not vramflow's dependencies: installed only now).
  apt-get install -y -q --no-install-recommends libbsd0 libgnutls30 libnftables1 libprotobuf-c1 libnl-3-200 \
    libnet1 libuuid1 >/tmp/apt-criu.log 2>&1 || { cat /tmp/apt-criu.log; fail "CRIU's libraries"; }
  # mmdebstrap's /proc in the root is read-only; CRIU writes to it (clear_refs): a /proc of its own
  # on top, and no process left behind (mmdebstrap waits for those).
  mount -t proc proc /proc
  setsid sleep 600 </dev/null >/dev/null 2>&1 &
  sleeper=$!
  trap 'kill $sleeper 2>/dev/null || true; umount /proc' EXIT
  mkdir -p /tmp/images
  # CRIU loads every plugin in its default directory first thing in a dump (no --libdir here: the
  # package's is the only one), and the plugin logs its version. The dump itself fails later in this chroot (CRIU
  # finds no parent for the chroot's mounts in the host's mount table), which is beside the point.
  "$criu" dump -t "$sleeper" -D /tmp/images -v4 -o dump.log || true
  grep -F "amdgpu_plugin (vramflow): $version (built for" /tmp/images/dump.log ||
    { cat /tmp/images/dump.log; fail "CRIU did not load /usr/lib/criu/amdgpu_plugin.so of $version"; }
fi

dpkg -r vramflow >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "dpkg -r vramflow"; }
for f in /usr/bin/vramflow /usr/lib/criu/amdgpu_plugin.so /usr/share/man/man1/vramflow.1 \
         /usr/lib/systemd/system/vramflow-recv@.service /usr/lib/systemd/system/vramflow-recv@.socket \
         /usr/lib/systemd/system/vramflow-recv-activated@.service /usr/share/bash-completion/completions/vramflow; do
  [ ! -e "$f" ] || fail "$f is left after dpkg -r"
done
dpkg --purge vramflow >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "dpkg --purge vramflow"; }
! dpkg -L vramflow >/dev/null 2>&1 || fail "dpkg still knows vramflow's files after --purge"
[ ! -e /usr/share/doc/vramflow ] || fail "/usr/share/doc/vramflow is left after --purge"
echo "deb_in_root: installed, checked and removed"
