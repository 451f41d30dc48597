#!/usr/bin/env bash
# The container test: checks the files in deploy/, builds the image from deploy/Dockerfile with
# podman on a local Debian base, runs it, and stops it the way an orchestrator does.
#
#   Tests/container/run.sh [BINARY]
#
# BINARY is a release build linked with --static-swift-stdlib (`make container-test` makes it).
# The base image, made by debootstrap from the machine's Debian mirror, is kept between runs;
# `podman rmi localhost/receptionist-base:bookworm` starts from scratch. Needs root.
set -euo pipefail

cd "$(dirname "$0")/../.."
here=Tests/container
binary=${1:-.build/release/receptionist}
python=${PYTHON:-python3}

base_image=localhost/receptionist-base:bookworm
image=localhost/receptionist:test
container=receptionist-test-$$
# The runtime libraries deploy/Dockerfile would otherwise install, so its build needs no network.
runtime_packages=libuv1,libhttp-parser2.9,libssl3,libhiredis0.14

# Podman's configuration for this test only: runc, cgroupfs, no systemd or journald.
export CONTAINERS_CONF="$PWD/$here/containers.conf"

started=$SECONDS
scratch=$(mktemp -d)
cleanup() {
  podman rm --force --time 0 "$container" >/dev/null 2>&1 || true
  rm -rf "$scratch"
}
trap cleanup EXIT

step() { echo "== $* ($((SECONDS - started)) s)"; }
fail() {
  echo "FAIL: $*" >&2
  if podman container exists "$container" 2>/dev/null; then
    echo "-- container log:" >&2
    podman logs "$container" 2>&1 | tail -n 40 >&2 || true
  fi
  exit 1
}

step "manifests"
timeout 60 "$python" "$here/check_manifests.py" deploy || fail "deploy/ manifests"
# nginx resolves upstream names while it checks, so the compose service names become loopback.
sed 's/gateway-[0-9]*:8080/127.0.0.1:8080/' deploy/nginx.conf >"$scratch/nginx.conf"
timeout 30 nginx -t -q -p "$scratch" -c "$scratch/nginx.conf" || fail "deploy/nginx.conf does not pass nginx -t"
if command -v systemd-analyze >/dev/null; then
  # verify warns about unknown or bad keys but exits 0, so any output fails.
  sed "s|^ExecStart=/usr/local/bin/receptionist|ExecStart=$(readlink -f "$binary")|" deploy/receptionist.service \
    >"$scratch/receptionist.service"
  report=$(timeout 60 systemd-analyze verify --man=no "$scratch/receptionist.service" 2>&1) || fail "systemd-analyze: $report"
  [ -z "$report" ] || fail "systemd-analyze: $report"
fi

step "binary"
[ -x "$binary" ] || fail "no binary at $binary"
if ldd "$binary" | grep -q 'libswift'; then
  fail "$binary links the Swift runtime dynamically; build it with --static-swift-stdlib"
fi

if podman image exists "$base_image"; then
  step "base image $base_image (kept from an earlier run)"
else
  # The mirror apt uses here, so the base comes from where this machine's packages come from.
  # shellcheck disable=SC2016 # $(SITE) is apt's field, not a command substitution.
  mirror=$(apt-get indextargets --format '$(SITE)' 'Codename: bookworm' 'Component: main' 'Identifier: Packages' \
    2>/dev/null | head -n 1)
  mirror=${mirror:-http://deb.debian.org/debian}
  step "base image $base_image: debootstrap from $mirror"
  rootfs="$scratch/rootfs"
  timeout 600 debootstrap --variant=minbase --include="$runtime_packages" bookworm "$rootfs" "$mirror" \
    >"$scratch/debootstrap.log" 2>&1 || { tail -n 20 "$scratch/debootstrap.log" >&2; fail "debootstrap"; }
  # What debian:bookworm-slim leaves out too: package caches, indexes, documentation, translations.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/* \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
  tar -C "$rootfs" -c . | timeout 300 podman import --quiet --change 'CMD ["bash"]' - "$base_image" >/dev/null \
    || fail "podman import"
fi

step "image $image"
# Docker format: the OCI image format has no HEALTHCHECK. The label marks the intermediate
# images, so those a rebuild leaves behind are pruned and repeated runs do not pile them up.
timeout 600 podman build --quiet --format docker --network host --label receptionist.container-test=1 \
  --build-arg BINARY_STAGE=prebuilt --build-arg BINARY="$binary" --build-arg BASE_IMAGE="$base_image" \
  -f deploy/Dockerfile -t "$image" . >/dev/null || fail "podman build"
timeout 60 podman image prune --force --filter label=receptionist.container-test=1 >/dev/null || true
healthcheck=$(podman image inspect --format '{{json .HealthCheck}}' "$image")
[[ "$healthcheck" == *healthz* ]] || fail "the image has no HEALTHCHECK on /healthz: $healthcheck"
user=$(podman image inspect --format '{{.User}}' "$image")
[[ "$user" =~ ^[1-9][0-9]*(:[0-9]+)?$ ]] || fail "the image runs as '$user', not as a numeric non-root user"
stop_signal=$(podman image inspect --format '{{.Config.StopSignal}}' "$image")
[ "$stop_signal" = SIGTERM ] || fail "stop signal is '$stop_signal'"
size=$(podman image inspect --format '{{.Size}}' "$image")
echo "image size: $((size / 1000000)) MB"

step "run"
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Limits no higher than this shell's hard limits, which runc cannot raise in a container here.
nofile=$(ulimit -Hn)
[ "$nofile" = unlimited ] && nofile=65536
nproc=$(ulimit -Hu)
{ [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; } && nproc=32768
base="http://127.0.0.1:$port"
# No systemd here to time the health check, so the test runs it once itself (podman still tries
# to set up a timer and logs that it cannot: --log-level=fatal keeps that out of the output).
timeout 60 podman --log-level=fatal run --detach --name "$container" --network host --read-only \
  --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" --pids-limit "$nproc" \
  --health-interval disable \
  --env RECEPTIONIST_HOST=127.0.0.1 --env RECEPTIONIST_PORT="$port" --env RECEPTIONIST_DEMO=1 \
  "$image" >/dev/null || fail "podman run"

deadline=$((SECONDS + 30))
until curl --silent --fail --max-time 2 --output /dev/null "$base/healthz"; do
  [ "$(podman inspect --format '{{.State.Running}}' "$container")" = true ] || fail "the container exited"
  [ $SECONDS -lt $deadline ] || fail "/healthz did not answer 200 within 30 s"
  sleep 0.2
done
status=$(curl --silent --max-time 5 --output /dev/null --write-out '%{http_code}' "$base/readyz")
[ "$status" = 200 ] || fail "/readyz answered $status"
curl --silent --max-time 5 --dump-header "$scratch/index.head" --output "$scratch/index.html" "$base/" \
  || fail "GET / failed"
grep -qi '^content-type: text/html' "$scratch/index.head" || fail "GET / is not text/html: $(cat "$scratch/index.head")"
cmp -s Public/index.html "$scratch/index.html" || fail "GET / is not the viewer's index.html"
status=$(curl --silent --max-time 5 --output /dev/null --write-out '%{http_code}' "$base/api/stores/tiles")
[ "$status" = 200 ] || fail "the demo store answered $status"
timeout 30 podman healthcheck run "$container" >/dev/null || fail "the image's HEALTHCHECK fails on a healthy gateway"
uid=$(timeout 30 podman exec "$container" id -u) || fail "podman exec"
[ "$uid" != 0 ] || fail "the gateway runs as root"

step "stop"
# SIGTERM (the image's STOPSIGNAL), then SIGKILL after 30 s: a graceful drain exits 0 well before.
stop_started=$SECONDS
timeout 60 podman --log-level=fatal stop --time 30 "$container" >/dev/null || fail "podman stop"
code=$(timeout 30 podman wait "$container") || fail "podman wait"
[ "$code" = 0 ] || fail "the gateway exited $code after SIGTERM, not 0"
[ $((SECONDS - stop_started)) -lt 30 ] || fail "the stop took the whole grace period"
podman logs "$container" 2>&1 | grep -q draining || fail "no drain in the log"

echo "container test: 1 passed, 0 failed ($((SECONDS - started)) s)"
