"""What every rendered variant must be (a valid Kubernetes object, references that resolve,
version-tagged images, probes, a graceful stop longer than the drain, autoscaler targets, an
Ingress for long-lived streams), the gateway's image tag against this tree's version, and
deploy/compose.yaml."""

import re
from pathlib import Path

import kubernetes_validate
import yaml

from kustomize_render import containers, describe, pod_specs, split_image
from manifest_errors import CheckError, check
from rendered_overlay import GATEWAY, pod_labels, selects

# The Kubernetes API release the manifests are checked against: 1.30, the oldest the manifests
# assume. Strict: a field the API does not know, a typo, fails too.
KUBERNETES_VERSION = "1.30.0"
# Where the gateway's version is, relative to the repository root.
BUILD_INFO = Path("Sources/ReceptionistGateway/operations/BuildInfo.swift")

# Annotations of ingress-nginx (https://kubernetes.github.io/ingress-nginx/) the manifests may
# use, with what the controller accepts for each (it ignores a value it does not accept, and any
# annotation it does not know, silently): a typo or "120s" for "120" fails here instead.
NGINX = "nginx.ingress.kubernetes.io/"
SECONDS = re.compile(r"[0-9]+")
SIZE = re.compile(r"[0-9]+[kKmMgG]?")
NGINX_ANNOTATIONS = {
    "proxy-connect-timeout": SECONDS,
    "proxy-read-timeout": SECONDS,
    "proxy-send-timeout": SECONDS,
    "proxy-next-upstream-timeout": SECONDS,
    "proxy-next-upstream-tries": SECONDS,
    "proxy-next-upstream": re.compile(r"((error|timeout|invalid_header|http_50[0234]|http_40[34]|http_429|non_idempotent|off) ?)+"),
    "proxy-buffering": re.compile(r"on|off"),
    "proxy-request-buffering": re.compile(r"on|off"),
    "proxy-http-version": re.compile(r"1\.0|1\.1"),
    "proxy-body-size": SIZE,
    "proxy-buffer-size": SIZE,
    # Connections at once from one client address.
    "limit-connections": re.compile(r"[1-9][0-9]*"),
    "ssl-redirect": re.compile(r"true|false"),
    "force-ssl-redirect": re.compile(r"true|false"),
}


def seconds(text):
    """'30s' or '1m' or 30 as seconds."""
    text = str(text)
    if text.endswith("m"):
        return float(text[:-1]) * 60
    return float(text.rstrip("s"))


# -- What the rendered manifests must be ----------------------------------------------------------

def check_schema(name, document):
    """Fails unless the document is a valid Kubernetes object of KUBERNETES_VERSION's API."""
    try:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        where = ".".join(str(part) for part in error.path) or "(top level)"
        raise CheckError(
            f"{name}: {describe(document)} is not valid for Kubernetes {error.version}: {where}: {error.message}"
        ) from None
    except kubernetes_validate.SchemaNotFoundError as error:
        raise CheckError(f"{name}: {describe(document)}: {error.message}") from None


def check_listed(directory):
    """Every YAML file in a kustomization's folder is one of its resources or patches."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text()) or {}
    listed = set(kustomization.get("resources") or []) | {
        entry.get("path") for entry in kustomization.get("patches") or [] if isinstance(entry, dict)
    }
    for path in sorted(directory.glob("*.y*ml")):
        if path.name not in ("kustomization.yaml", "kustomization.yml"):
            check(path.name in listed, f"{path}: not listed in its kustomization.yaml, so it is never applied")


def check_common(overlay):
    """What every variant must be: references that resolve, images with a version tag, probes, a
    graceful stop longer than the drain, non-root containers with resources, an Ingress for
    long-lived streams."""
    workloads = overlay.workloads()
    for workload in workloads:
        what = describe(workload)
        labels = pod_labels(workload)
        overlay.fail_unless(selects(workload["spec"]["selector"].get("matchLabels"), labels), f"{what}: its selector does not match its pods' labels")
        pod = pod_specs(workload)[0]
        overlay.fail_unless((pod.get("securityContext") or {}).get("runAsNonRoot") is True, f"{what}: runAsNonRoot is not true")
        claims = {template["metadata"]["name"] for template in workload["spec"].get("volumeClaimTemplates") or []}
        volumes = {volume["name"] for volume in pod.get("volumes") or []} | claims
        for volume in pod.get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                overlay.fail_unless(overlay.get("PersistentVolumeClaim", claim), f"{what}: volume {volume['name']} claims {claim}, which the overlay does not define")
            secret = (volume.get("secret") or {}).get("secretName")
            if secret:
                document = overlay.get("Secret", secret)
                overlay.fail_unless(document, f"{what}: volume {volume['name']} mounts Secret {secret}, which the overlay does not define")
                keys = set(document.get("stringData") or {}) | set(document.get("data") or {})
                for item in volume["secret"].get("items") or []:
                    overlay.fail_unless(item["key"] in keys, f"{what}: Secret {secret} has no key {item['key']}")
        for container in containers(workload):
            where = f"{what}, container {container['name']}"
            image = str(container.get("image", ""))
            _, tag, _ = split_image(image)
            overlay.fail_unless(tag is not None, f"{where}: image {image} has no version tag (set one in the kustomization's images)")
            overlay.fail_unless(tag != "latest" and re.fullmatch(r"v?[0-9]+(\.[0-9]+)*([-+._][0-9A-Za-z.-]+)?", tag), f"{where}: image {image}: the tag {tag} is not a version")
            security = container.get("securityContext") or {}
            overlay.fail_unless(security.get("allowPrivilegeEscalation") is False, f"{where}: allowPrivilegeEscalation is not false")
            overlay.fail_unless(security.get("readOnlyRootFilesystem") is True, f"{where}: readOnlyRootFilesystem is not true")
            resources = container.get("resources") or {}
            overlay.fail_unless("requests" in resources and "memory" in (resources.get("limits") or {}), f"{where}: no resource requests and memory limit")
            for mount in container.get("volumeMounts") or []:
                overlay.fail_unless(mount["name"] in volumes, f"{where}: mounts {mount['name']}, which is no volume of the pod")
            for variable in container.get("env") or []:
                reference = (variable.get("valueFrom") or {}).get("secretKeyRef")
                if reference:
                    document = overlay.get("Secret", reference["name"])
                    overlay.fail_unless(document, f"{where}: {variable['name']} comes from Secret {reference['name']}, which the overlay does not define")
                    keys = set(document.get("stringData") or {}) | set(document.get("data") or {})
                    overlay.fail_unless(reference["key"] in keys, f"{where}: Secret {reference['name']} has no key {reference['key']}")
            for source in container.get("envFrom") or []:
                reference = source.get("configMapRef")
                if reference:
                    overlay.fail_unless(overlay.get("ConfigMap", reference["name"]), f"{where}: envFrom names ConfigMap {reference['name']}, which the overlay does not define")

    # Services reach pods, and their ports are the pods' ports.
    for service in overlay.all("Service"):
        selector = service["spec"].get("selector") or {}
        targets = [workload for workload in workloads if selects(selector, pod_labels(workload))]
        overlay.fail_unless(targets, f"Service {service['metadata']['name']}: its selector {selector} matches no workload's pods")
        ports = [port for workload in targets for container in containers(workload) for port in container.get("ports") or []]
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            overlay.fail_unless(
                any(target in (candidate.get("name"), candidate["containerPort"]) for candidate in ports),
                f"Service {service['metadata']['name']}: targetPort {target} is no port of its pods",
            )
    for budget in overlay.all("PodDisruptionBudget"):
        selector = budget["spec"]["selector"].get("matchLabels")
        overlay.fail_unless(any(selects(selector, pod_labels(workload)) for workload in workloads), f"PodDisruptionBudget {budget['metadata']['name']}: selects no workload's pods")
    for autoscaler in overlay.all("HorizontalPodAutoscaler"):
        check_autoscaler(overlay, autoscaler)

    # The gateway: probes, drain, port.
    deployment, container = overlay.gateway()
    pod = deployment["spec"]["template"]["spec"]
    drain = float(overlay.option("drain-timeout"))
    pause = 0.0
    pre_stop = (container.get("lifecycle") or {}).get("preStop") or {}
    if "sleep" in pre_stop:
        pause = float(pre_stop["sleep"]["seconds"])
    elif "exec" in pre_stop:
        command = pre_stop["exec"]["command"]
        overlay.fail_unless(
            len(command) == 2 and command[0] in ("sleep", "/bin/sleep", "/usr/bin/sleep"),
            f"Deployment {GATEWAY}: a preStop hook other than a sleep ({command}): the check cannot tell how long it takes",
        )
        pause = float(command[1])
    grace = pod.get("terminationGracePeriodSeconds", 30)
    overlay.fail_unless(grace > drain + pause, f"Deployment {GATEWAY}: terminationGracePeriodSeconds ({grace}) must exceed the preStop pause ({pause:g} s) plus the drain timeout ({drain:g} s)")
    port_names = {port.get("name") for port in container.get("ports") or []}
    readiness = container.get("readinessProbe") or {}
    liveness = container.get("livenessProbe") or {}
    overlay.fail_unless((readiness.get("httpGet") or {}).get("path") == "/readyz", f"Deployment {GATEWAY}: no readiness probe on /readyz")
    overlay.fail_unless((liveness.get("httpGet") or {}).get("path") == "/healthz", f"Deployment {GATEWAY}: no liveness probe on /healthz")
    for probe in (readiness, liveness):
        overlay.fail_unless(probe["httpGet"]["port"] in port_names | {int(overlay.option("port"))}, f"Deployment {GATEWAY}: a probe on port {probe['httpGet']['port']}, which the container does not have")
    overlay.fail_unless(
        liveness.get("periodSeconds", 10) * liveness.get("failureThreshold", 3) > drain,
        f"Deployment {GATEWAY}: the liveness probe must tolerate a whole drain ({drain:g} s) without a restart",
    )
    overlay.fail_unless(
        int(overlay.option("port")) in [port["containerPort"] for port in container.get("ports") or []],
        f"Deployment {GATEWAY}: the gateway listens on {overlay.option('port')}, which is no containerPort",
    )
    check_ingress(overlay)


def check_autoscaler(overlay, autoscaler):
    name = f"HorizontalPodAutoscaler {autoscaler['metadata']['name']}"
    target = autoscaler["spec"]["scaleTargetRef"]
    workload = overlay.get(target["kind"], target["name"])
    overlay.fail_unless(
        workload is not None and workload["apiVersion"] == target.get("apiVersion"),
        f"{name}: scaleTargetRef names {target['kind']} {target['name']} ({target.get('apiVersion')}), which the overlay does not define",
    )
    minimum = autoscaler["spec"].get("minReplicas", 1)
    overlay.fail_unless(minimum <= autoscaler["spec"]["maxReplicas"], f"{name}: minReplicas above maxReplicas")
    for metric in autoscaler["spec"].get("metrics") or []:
        resource = metric.get("resource") or {}
        if metric["type"] == "Resource" and resource["target"]["type"] == "Utilization":
            for container in containers(workload):
                overlay.fail_unless(
                    resource["name"] in ((container.get("resources") or {}).get("requests") or {}),
                    f"{name}: scales on {resource['name']} utilization, but container {container['name']} requests no {resource['name']}",
                )


def check_ingress(overlay):
    """An Ingress to the gateway's Service that keeps WebSocket and SSE streams open: timeouts
    above the quiet the gateway allows on a stream, no response buffering, HTTP/1.1 upstream."""
    service = overlay.get("Service", GATEWAY)
    overlay.fail_unless(service is not None, f"no Service {GATEWAY}")
    ingresses = [
        ingress
        for ingress in overlay.all("Ingress")
        for rule in ingress["spec"].get("rules") or []
        for path in (rule.get("http") or {}).get("paths") or []
        if path["backend"].get("service", {}).get("name") == GATEWAY
    ]
    overlay.fail_unless(ingresses, f"no Ingress to Service {GATEWAY}")
    quiet = max(
        float(overlay.option("ping-interval")) + float(overlay.option("ping-timeout")),
        float(overlay.option("sse-heartbeat")),
    )
    for ingress in overlay.all("Ingress"):
        name = f"Ingress {ingress['metadata']['name']}"
        overlay.fail_unless(ingress["spec"].get("ingressClassName"), f"{name}: no ingressClassName")
        for rule in ingress["spec"].get("rules") or []:
            for path in (rule.get("http") or {}).get("paths") or []:
                backend = path["backend"].get("service")
                if not backend:
                    continue
                target = overlay.get("Service", backend["name"])
                overlay.fail_unless(target, f"{name}: routes to Service {backend['name']}, which the overlay does not define")
                port = backend["port"]
                overlay.fail_unless(
                    any(port.get("name", port.get("number")) in (candidate.get("name"), candidate["port"]) for candidate in target["spec"]["ports"]),
                    f"{name}: routes to port {port} of Service {backend['name']}, which it does not have",
                )
        annotations = ingress["metadata"].get("annotations") or {}
        for key, value in annotations.items():
            if key.startswith(NGINX):
                short = key[len(NGINX):]
                overlay.fail_unless(short in NGINX_ANNOTATIONS, f"{name}: {key} is not an ingress-nginx annotation these manifests know (a typo?)")
                overlay.fail_unless(
                    isinstance(value, str) and NGINX_ANNOTATIONS[short].fullmatch(value),
                    f"{name}: {key}: {value!r} is not a value ingress-nginx takes (it would ignore it)",
                )
        if ingress not in ingresses:
            continue
        for timeout in ("proxy-read-timeout", "proxy-send-timeout"):
            value = annotations.get(NGINX + timeout)
            overlay.fail_unless(value is not None, f"{name}: no {NGINX}{timeout}: streams would be cut after ingress-nginx's default")
            overlay.fail_unless(
                float(value) > quiet,
                f"{name}: {NGINX}{timeout} ({value} s) must exceed the quiet a stream may have ({quiet:g} s: the ping interval and timeout, the SSE heartbeat)",
            )
        overlay.fail_unless(annotations.get(NGINX + "proxy-buffering") == "off", f"{name}: {NGINX}proxy-buffering is not \"off\": SSE events would wait in the proxy's buffer")
        overlay.fail_unless(annotations.get(NGINX + "proxy-http-version") == "1.1", f"{name}: {NGINX}proxy-http-version is not \"1.1\", which WebSocket upgrades need")


def check_version(k8s, overlays):
    """Where the manifests lie in the repository, the gateway's image is this tree's version."""
    build_info = k8s.resolve().parent.parent / BUILD_INFO
    if not build_info.is_file():
        return None
    match = re.search(r'static let version = "([^"]+)"', build_info.read_text())
    if not match:
        return None
    for overlay in overlays:
        _, container = overlay.gateway()
        _, tag, _ = split_image(container["image"])
        check(
            tag == match.group(1),
            f"{overlay.name}: the gateway's image is tagged {tag}, but this tree builds {match.group(1)} "
            f"({BUILD_INFO}): set newTag in base/kustomization.yaml",
        )
    return match.group(1)


def check_compose(path):
    compose = yaml.safe_load(path.read_text())
    services = compose["services"]
    check({"redis", "gateway-1", "gateway-2", "nginx"} <= services.keys(), "compose services")
    for name in ("gateway-1", "gateway-2"):
        gateway = services[name]
        drain = float(gateway["environment"]["RECEPTIONIST_DRAIN_TIMEOUT"])
        check(seconds(gateway["stop_grace_period"]) > drain, f"{name}: stop_grace_period must exceed the drain timeout")
        command = " ".join(gateway["command"])
        check("--engine redis" in command and "--redis-url redis://redis:6379/0" in command, f"{name}: Redis engine")
    for secret, source in compose.get("secrets", {}).items():
        check(all(secret in services[name].get("secrets", []) for name in ("gateway-1", "gateway-2")), f"secret {secret}")
        # podman-compose mounts a secret from a file only (not from the environment).
        check("file" in source, f"secret {secret} does not come from a file")
