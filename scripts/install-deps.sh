#!/usr/bin/env bash
# Installs the Debian packages a make target needs, only those that are missing.
# Usage: scripts/install-deps.sh build|test|bench|container
set -euo pipefail

packages=(libuv1-dev libhttp-parser-dev libssl-dev libhiredis-dev zlib1g-dev libsqlite3-dev libcurl4-openssl-dev pkg-config)
case "${1:-build}" in
  build) ;;
  test) packages+=(curl python3 python3-venv chromium chromium-driver redis-server nodejs node-typescript) ;;
  bench) packages+=(curl gcc wrk nginx-light libnginx-mod-nchan redis-server python3 python3-venv linux-perf valgrind) ;;
  # The container test: podman on the runc runtime, a base image made by debootstrap, and nginx
  # to check the load balancer's configuration; netavark and aardvark-dns give the compose test's
  # bridge network its name resolution (Tests/container/containers.conf picks netavark).
  container) packages+=(curl podman runc debootstrap uidmap slirp4netns fuse-overlayfs nginx-light python3 python3-venv chromium chromium-driver
                        netavark aardvark-dns iptables) ;;
  *) echo "usage: $0 build|test|bench|container" >&2; exit 2 ;;
esac

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
