#!/usr/bin/env bash
# The container test: checks the files in deploy/ (the Kubernetes manifests against the API's
# schemas), builds the image from deploy/Dockerfile with podman on a local Debian base, runs it,
# and stops it the way an orchestrator does; then runs deploy/compose.yaml with podman-compose
# (compose_test.py): two nodes behind nginx, one stopped while its clients resume on the other.
#
#   Tests/container/run.sh [BINARY]
#
# BINARY is a release build linked with --static-swift-stdlib (`make container-test` makes it).
# PYTHON must have PyYAML, kubernetes-validate, podman-compose and websockets (the e2e venv).
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
# Stand-ins for compose.yaml's redis and nginx images, from services.Containerfile.
redis_image=localhost/receptionist-test-redis:test
nginx_image=localhost/receptionist-test-nginx:test
compose_project=receptionist-compose-$$
# The runtime libraries deploy/Dockerfile would otherwise install, so its build needs no network.
runtime_packages=libuv1,libhttp-parser2.9,libssl3,libhiredis0.14,libsqlite3-0,libcurl4

# Podman's configuration for this test only: runc, cgroupfs, no systemd or journald.
export CONTAINERS_CONF="$PWD/$here/containers.conf"

started=$SECONDS
scratch=$(mktemp -d)
cleanup() {
  podman rm --force --time 0 "$container" >/dev/null 2>&1 || true
  # compose_test.py takes its stack down itself; this is for a run killed before it could. A
  # container still being stopped (by an orphaned podman-compose) refuses removal for a moment.
  local ids id attempt
  for attempt in 1 2 3 4 5; do
    ids=$(podman ps --all --quiet --filter "label=io.podman.compose.project=$compose_project" 2>/dev/null) || true
    [ -z "$ids" ] && break
    for id in $ids; do
      podman rm --force --depend --time 0 "$id" >/dev/null 2>&1 || true
    done
    [ "$attempt" = 5 ] || sleep 1
  done
  ids=$(podman network ls --quiet --filter "label=io.podman.compose.project=$compose_project" 2>/dev/null) || true
  for id in $ids; do
    podman network rm --force "$id" >/dev/null 2>&1 || true
  done
  rm -rf "$scratch"
}
trap cleanup EXIT
# A stop by timeout(1) or ^C cleans up too.
trap 'exit 143' TERM INT

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
# The schema check catches an invalid manifest: a copy with a broken Deployment must fail it.
cp -R deploy "$scratch/broken"
sed -i 's/^  replicas: 1$/  replicas: "2"/' "$scratch/broken/k8s/single-node/deployment-patch.yaml"
grep -q '^  replicas: "2"$' "$scratch/broken/k8s/single-node/deployment-patch.yaml" || fail "could not break the copy of the single-node Deployment"
if report=$(timeout 60 "$python" "$here/check_manifests.py" "$scratch/broken" 2>&1); then
  fail "check_manifests.py passes a Deployment whose replicas is a string"
fi
[[ "$report" == *"spec.replicas: '2' is not of type 'integer'"* ]] || fail "the broken Deployment failed otherwise: $report"
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
libraries=$(ldd "$binary" 2>&1 || true)
if grep -q 'libswift' <<< "$libraries"; then
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
# The build context holds what the prebuilt stage takes, where .dockerignore lets it through, so
# BINARY may lie anywhere (and the context is not the whole checkout with its build folders).
context="$scratch/context"
mkdir -p "$context/.build/release"
cp .dockerignore "$context/"
cp -R Public "$context/"
cp "$binary" "$context/.build/release/receptionist"
# Docker format: the OCI image format has no HEALTHCHECK. The label marks the intermediate
# images, so those a rebuild leaves behind are pruned and repeated runs do not pile them up.
timeout 600 podman build --quiet --format docker --network host --label receptionist.container-test=1 \
  --build-arg BINARY_STAGE=prebuilt --build-arg BASE_IMAGE="$base_image" \
  -f deploy/Dockerfile -t "$image" "$context" >/dev/null || fail "podman build"
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
status=$(curl --silent --max-time 5 --output /dev/null --write-out '%{http_code}' -X PUT --data '{"kept":"before the stop"}' \
  "$base/api/stores/tiles/models/kept")
[ "$status" = 201 ] || fail "PUT of a model answered $status"
uid=$(timeout 30 podman exec "$container" id -u) || fail "podman exec"
[ "$uid" != 0 ] || fail "the gateway runs as root"

step "stop"
# SIGTERM (the image's STOPSIGNAL), then SIGKILL after 30 s: a graceful drain exits 0 well before.
stop_started=$SECONDS
timeout 60 podman --log-level=fatal stop --time 30 "$container" >/dev/null || fail "podman stop"
code=$(timeout 30 podman wait "$container") || fail "podman wait"
[ "$code" = 0 ] || fail "the gateway exited $code after SIGTERM, not 0"
[ $((SECONDS - stop_started)) -lt 30 ] || fail "the stop took the whole grace period"
# Read whole before searching: `grep -q` stops at the first match, and under pipefail the writer
# it leaves behind (SIGPIPE) would fail the check.
log=$(timeout 30 podman logs "$container" 2>&1) || fail "podman logs"
grep -q draining <<< "$log" || fail "no drain in the log"

step "restart keeps the stores"
# The demo store and a model written before the stop come back from the image's data volume.
timeout 60 podman --log-level=fatal start "$container" >/dev/null || fail "podman start"
deadline=$((SECONDS + 30))
until curl --silent --fail --max-time 2 --output /dev/null "$base/healthz"; do
  [ "$(podman inspect --format '{{.State.Running}}' "$container")" = true ] || fail "the container exited after a restart"
  [ $SECONDS -lt $deadline ] || fail "/healthz did not answer 200 within 30 s of a restart"
  sleep 0.2
done
grep -q '"kept":"before the stop"' <<< "$(curl --silent --max-time 5 "$base/api/stores/tiles/models/kept")" \
  || fail "the model written before the stop is gone after a restart"
timeout 60 podman --log-level=fatal stop --time 30 "$container" >/dev/null || fail "podman stop after the restart"
podman rm --force --time 0 "$container" >/dev/null 2>&1 || true

step "compose images $redis_image, $nginx_image"
# Debian's redis-server and nginx on the base image, installed from the mirror over the host's
# network. Labelled like the gateway's, so the layers a rebuild leaves behind are pruned.
for target in redis nginx; do
  target_image=$redis_image
  [ "$target" = nginx ] && target_image=$nginx_image
  timeout 600 podman build --quiet --format docker --network host --label receptionist.container-test=1 \
    --build-arg BASE_IMAGE="$base_image" --target "$target" -f "$here/services.Containerfile" \
    -t "$target_image" "$here" >"$scratch/build-$target.log" 2>&1 \
    || { tail -n 20 "$scratch/build-$target.log" >&2; fail "podman build --target $target"; }
done
timeout 60 podman image prune --force --filter label=receptionist.container-test=1 >/dev/null || true

step "compose"
mkdir "$scratch/compose"
RCPT_TEST_SCRATCH="$scratch/compose" RCPT_TEST_PROJECT=$compose_project RCPT_TEST_GATEWAY_IMAGE=$image \
  RCPT_TEST_REDIS_IMAGE=$redis_image RCPT_TEST_NGINX_IMAGE=$nginx_image \
  timeout 300 "$python" "$here/compose_test.py" || fail "compose"

echo "container test: 2 passed, 0 failed ($((SECONDS - started)) s)"
