#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine lacks to build and test the
# project: cmake, ninja, a C/C++ compiler, binutils, pkg-config. Needs root (or sudo) only
# when something is missing. The Rust toolchain (cargo) must already be there.
set -euo pipefail

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v nm >/dev/null 2>&1 || missing+=(binutils)
command -v flock >/dev/null 2>&1 || missing+=(util-linux)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v readelf >/dev/null 2>&1 || missing+=(binutils)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkgconf)

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    echo "setup: add \$HOME/.cargo/bin to PATH" >&2
  fi
  echo "setup: cargo (Rust toolchain) is required" >&2
  exit 1
fi
