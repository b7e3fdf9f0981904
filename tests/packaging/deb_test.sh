#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Debian package in a clean Debian 12 root: made with mmdebstrap from the
# machine's apt mirror, the package installed with apt (its dependencies come
# from the mirror), checked there (tests/packaging/deb_in_root.sh), removed and
# purged. With CRIU (a CRIU 4.2 binary built from ../shared/criu), also that
# this CRIU finds and loads the plugin from /usr/lib/criu without --libdir.
# Needs root and mmdebstrap (scripts/setup.sh installs it). About 1.5 minutes,
# most of it mmdebstrap.
#
# usage: tests/packaging/deb_test.sh DEB [CRIU]
set -euo pipefail
deb=$(realpath "${1:?usage: deb_test.sh DEB [CRIU]}")
criu=${2:+$(realpath "$2")}
here=$(dirname "$(realpath "$0")")
root=$(mktemp -d /tmp/vramflow-deb-root.XXXXXX)
trap 'rm -rf "$root"' EXIT
hooks=(--customize-hook="copy-in $deb $here/deb_in_root.sh /tmp")
if [ -n "$criu" ]; then
  hooks+=(--customize-hook="copy-in $criu /usr/local/sbin")
  in_root_criu=/usr/local/sbin/$(basename "$criu")
fi
hooks+=(--customize-hook="chroot \"\$1\" /bin/bash /tmp/deb_in_root.sh /tmp/$(basename "$deb") ${in_root_criu:-}")
# man-db and bash-completion: what a user's system has for `man vramflow` and `vramflow <TAB>`; mount: CRIU's /proc.
mmdebstrap --quiet --variant=apt --include=man-db,bash-completion,mount "${hooks[@]}" bookworm "$root"
echo "deb_test: $(basename "$deb") installed, checked, removed and purged in a clean Debian 12 root"
