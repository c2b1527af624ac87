#!/usr/bin/env bash
# Make the step image's base from Debian's own packages, for machines that reach no container registry.
#
#   scripts/build_base_image.sh [TAG]        (default TAG: frugalrl-base:bookworm)
#
# A minbase Debian bookworm with python3 (3.11, as python:3.11-slim), venv, CA certificates and the
# libraries the steps load (git for the audit's worktrees, OSMesa for MuJoCo's offscreen frames in the
# report's episode GIFs, libglib2.0-0 for ALE),
# made with debootstrap and loaded with `docker import`. The root filesystem's tarball is cached in
# FRUGALRL_CACHE (default ~/.cache/frugalrl), so a later run (CI on the same machine) loads it in
# seconds instead of making it again (about 3 minutes). Needs root, debootstrap and a Docker daemon.
# Then:  frugalrl image build --base TAG
set -euo pipefail

TAG="${1:-frugalrl-base:bookworm}"
SUITE="bookworm"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES="python3,python3-venv,ca-certificates,git,libosmesa6,libglib2.0-0"
CACHE="${FRUGALRL_CACHE:-$HOME/.cache/frugalrl}"
TARBALL="$CACHE/base-$SUITE-$(echo "$PACKAGES" | sha256sum | cut -c1-12).tar"

fail() { echo "build_base_image: $1" >&2; exit 2; }
docker info >/dev/null 2>&1 || fail "no Docker daemon answers; start one (dockerd) and run this again"

if docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "base image $TAG is already loaded"
  exit 0
fi

if [ ! -s "$TARBALL" ]; then
  command -v debootstrap >/dev/null 2>&1 || fail "debootstrap is not installed; apt-get install -y debootstrap"
  [ "$(id -u)" = 0 ] || fail "debootstrap needs root; run this as root"
  mkdir -p "$CACHE"
  ROOTFS="$(mktemp -d)"
  trap 'rm -rf "$ROOTFS"' EXIT
  echo "making a Debian $SUITE root filesystem with debootstrap (about 3 minutes) ..."
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || fail "debootstrap failed; its log is $CACHE/debootstrap.log"
  # What a container never needs: package lists, caches, docs and manual pages.
  rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/* "$ROOTFS"/usr/share/doc/* \
    "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/locale/*
  tar -C "$ROOTFS" --numeric-owner -cf "$TARBALL.partial" .
  mv "$TARBALL.partial" "$TARBALL"  # a cut-short run leaves no tarball that looks whole
fi

docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["python3"]' \
  "$TARBALL" "$TAG" >/dev/null
echo "base image $TAG loaded ($(du -h "$TARBALL" | cut -f1) root filesystem, cached in $TARBALL)"
