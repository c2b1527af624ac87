#!/bin/sh
# `docker run IMAGE check` runs `frugalrl check`. A shell, a Python or a path as the first argument
# runs as given: kfp.local's DockerRunner (and any caller that brings its own command) passes one.
# Files a step writes are group-writable: on a mounted pipeline root (setgid, the caller's group)
# the caller can remove them.
umask 0002
case "${1:-}" in
  sh | bash | python | python3 | /*) exec "$@" ;;
  *) exec frugalrl "$@" ;;
esac
