"""Checks the deployment manifests in deploy/.

The Kubernetes manifests are a kustomize base (deploy/k8s/base) and two overlays, single-node and
cluster. Each overlay is rendered the way `kubectl kustomize` would, by a small renderer here for
the part of kustomize the manifests use (so this runs where no kustomize is installed); where
`kustomize` or a `kubectl` with kustomize v4 or later is on PATH, the real rendering is compared
with this one document by document. Every rendered document is then validated against the
Kubernetes API's schemas (kubernetes-validate, which carries them, so this runs offline, strictly:
an unknown field fails), and checked for what the gateway needs: a version-tagged image, the
engine each variant means to run (one replica and Recreate on a volume for the disk engine;
--engine redis at a Redis Service, an autoscaler on the real Deployment and a spread over nodes
for the cluster), probes, a graceful stop longer than the drain, and an Ingress that keeps
WebSocket and SSE streams open and unbuffered. deploy/compose.yaml is checked too.

Usage: python check_manifests.py DIR

DIR is deploy/ (the Kubernetes manifests in its k8s/ folder, and compose.yaml) or deploy/k8s (the
Kubernetes manifests alone). Exits 1 with a line starting "FAIL:" at the first problem.
"""

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import yaml

# The Kubernetes API release the manifests are checked against: 1.30, the oldest the manifests
# assume. Strict: a field the API does not know, a typo, fails too.
KUBERNETES_VERSION = "1.30.0"
# The overlays, each a variant of the gateway that `kubectl apply -k` deploys.
SINGLE_NODE = "single-node"
CLUSTER = "cluster"
OVERLAYS = (SINGLE_NODE, CLUSTER)
# The gateway's own objects are all named so.
GATEWAY = "receptionist"
# The gateway's defaults (`receptionist serve --help`) for the options the checks need.
DEFAULTS = {"port": "8080", "drain-timeout": "10", "ping-interval": "30", "ping-timeout": "10", "sse-heartbeat": "15"}
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
    "ssl-redirect": re.compile(r"true|false"),
    "force-ssl-redirect": re.compile(r"true|false"),
}


class CheckError(Exception):
    """A problem in the manifests: the message says what and where."""


def check(condition, message):
    if not condition:
        raise CheckError(message)


def seconds(text):
    """'30s' or '1m' or 30 as seconds."""
    text = str(text)
    if text.endswith("m"):
        return float(text[:-1]) * 60
    return float(text.rstrip("s"))


def identity(document):
    """How kustomize tells resources apart: kind, name and API group and version."""
    return (document.get("apiVersion"), document.get("kind"), (document.get("metadata") or {}).get("name"))


def describe(document):
    return f"{document.get('kind')} {(document.get('metadata') or {}).get('name')}"


# -- The renderer ---------------------------------------------------------------------------------
#
# The part of kustomize the manifests use: `resources` (files and other kustomization folders),
# `patches` with a `path` (strategic merge patches, each naming its target by apiVersion, kind and
# name) and `images`. Anything else in a kustomization fails, so the renderer never renders
# something differently from kustomize without saying so.

KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "resources", "patches", "images"}
IMAGE_FIELDS = {"name", "newName", "newTag", "digest"}
# Lists that a strategic merge patch merges item by item, by the key named (the Kubernetes API's
# patchMergeKey); every other list in a patch replaces the original's. `ports` is keyed by
# containerPort in a container and by port in a Service.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}


def load_manifests(path):
    """The documents of a YAML file, each a Kubernetes object (empty documents skipped)."""
    try:
        documents = [document for document in yaml.safe_load_all(path.read_text()) if document is not None]
    except yaml.YAMLError as error:
        raise CheckError(f"{path}: not YAML: {error}") from None
    for document in documents:
        check(
            isinstance(document, dict) and "apiVersion" in document and "kind" in document
            and isinstance(document.get("metadata"), dict) and "name" in document["metadata"],
            f"{path}: a document without apiVersion, kind and metadata.name",
        )
    return documents


def strategic_merge(original, patch, path=()):
    """The original with a strategic merge patch applied, as kustomize applies one: maps merge
    key by key (null deletes a key), lists of MERGE_KEYS merge item by item (the patch's items in
    its order, merged with the original's of the same key, then the original's other items), and
    any other value or list replaces the original's."""
    where = ".".join(path) or "(top level)"
    if isinstance(patch, dict):
        if not isinstance(original, dict):
            return copy.deepcopy(patch)
        result = dict(original)
        for key, value in patch.items():
            check(not str(key).startswith("$"), f"patch directive {key} at {where} is not supported by this renderer")
            if value is None:
                result.pop(key, None)
            elif key in result:
                result[key] = strategic_merge(result[key], value, path + (key,))
            else:
                result[key] = copy.deepcopy(value)
        return result
    if isinstance(patch, list) and isinstance(original, list) and path:
        field = path[-1]
        key = MERGE_KEYS.get(field)
        if field == "ports":
            key = "containerPort" if any(part in ("containers", "initContainers") for part in path) else "port"
        if key is None:
            return copy.deepcopy(patch)
        for item in original + patch:
            check(isinstance(item, dict) and key in item, f"an item of {where} has no {key}, the key it merges by")
        originals = {item[key]: item for item in original}
        patched = [strategic_merge(originals.get(item[key], {}), item, path) for item in patch]
        keys = {item[key] for item in patch}
        return patched + [copy.deepcopy(item) for item in original if item[key] not in keys]
    return copy.deepcopy(patch)


def split_image(reference):
    """'registry:5000/name:tag@sha256:…' as (name, tag or None, digest or None)."""
    name, _, digest = reference.partition("@")
    tag = None
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    return name, tag, digest or None


def pod_specs(document):
    """The pod specs of a workload (a pod's own spec for a Pod), or none."""
    spec = document.get("spec") or {}
    kind = document.get("kind")
    if kind == "Pod":
        return [spec]
    if kind == "CronJob":
        return [(((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}]
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController"):
        return [(spec.get("template") or {}).get("spec") or {}]
    return []


def containers(document):
    return [
        container
        for pod in pod_specs(document)
        for field in ("initContainers", "containers")
        for container in pod.get(field) or []
    ]


def set_images(documents, images, where):
    """kustomize's `images`: a container whose image has the name gets the new name, tag or digest."""
    for image in images:
        check(isinstance(image, dict) and "name" in image, f"{where}: an entry of images has no name")
        unknown = set(image) - IMAGE_FIELDS
        check(not unknown, f"{where}: images field(s) {sorted(unknown)} are not supported by this renderer")
        for document in documents:
            for container in containers(document):
                name, tag, digest = split_image(str(container.get("image", "")))
                if name != image["name"]:
                    continue
                name = image.get("newName", name)
                if "digest" in image:
                    tag, digest = None, image["digest"]
                elif "newTag" in image:
                    tag, digest = str(image["newTag"]), None
                container["image"] = name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


def render(directory, _seen=()):
    """The objects `kubectl kustomize DIRECTORY` prints, in the order the resources list them."""
    directory = Path(directory).resolve()
    check(directory not in _seen, f"{directory}: kustomizations include each other in a cycle")
    path = directory / "kustomization.yaml"
    check(path.is_file(), f"{directory}: no kustomization.yaml")
    try:
        kustomization = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise CheckError(f"{path}: not YAML: {error}") from None
    check(isinstance(kustomization, dict), f"{path}: not a kustomization")
    check(kustomization.get("kind", "Kustomization") == "Kustomization", f"{path}: kind is not Kustomization")
    unknown = set(kustomization) - KUSTOMIZATION_FIELDS
    check(
        not unknown,
        f"{path}: field(s) {sorted(unknown)} are not supported by this renderer "
        f"(it renders {', '.join(sorted(KUSTOMIZATION_FIELDS - {'apiVersion', 'kind'}))})",
    )

    documents = []
    for entry in kustomization.get("resources") or []:
        resource = directory / entry
        if resource.is_dir():
            documents += render(resource, _seen + (directory,))
        elif resource.is_file():
            documents += load_manifests(resource)
        else:
            raise CheckError(f"{path}: resource {entry} does not exist")
    seen = set()
    for document in documents:
        check(identity(document) not in seen, f"{path}: {describe(document)} is defined twice")
        seen.add(identity(document))

    for entry in kustomization.get("patches") or []:
        check(
            isinstance(entry, dict) and set(entry) == {"path"},
            f"{path}: a patch other than one with a path alone is not supported by this renderer: {entry}",
        )
        patch_path = directory / entry["path"]
        check(patch_path.is_file(), f"{path}: patch {entry['path']} does not exist")
        patches = load_manifests(patch_path)
        check(len(patches) == 1, f"{patch_path}: one patch per file")
        (patch,) = patches
        targets = [index for index, document in enumerate(documents) if identity(document) == identity(patch)]
        check(targets, f"{patch_path}: patches {describe(patch)} ({patch['apiVersion']}), which no resource defines")
        documents[targets[0]] = strategic_merge(documents[targets[0]], patch)

    set_images(documents, kustomization.get("images") or [], path)
    return documents


# -- The real kustomize, where there is one -------------------------------------------------------

def real_kustomize():
    """(command prefix, version) of a kustomize v4 or later on PATH, or (None, why there is none).
    kubectl carries kustomize, but before kubectl 1.21 an old one (v2) that reads no `patches`."""
    if shutil.which("kustomize"):
        try:
            version = subprocess.run(
                ["kustomize", "version"], capture_output=True, text=True, timeout=60, check=False
            ).stdout.strip()
        except subprocess.TimeoutExpired:
            version = ""
        match = re.search(r"v(\d+)\.\d+\.\d+", version)
        if match and int(match.group(1)) >= 4:
            return ["kustomize", "build"], f"kustomize {match.group(0)}"
    if shutil.which("kubectl"):
        try:
            output = subprocess.run(
                ["kubectl", "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60, check=False
            ).stdout
            version = json.loads(output).get("kustomizeVersion", "")
        except (subprocess.TimeoutExpired, ValueError):
            version = ""
        match = re.search(r"v(\d+)\.\d+\.\d+", version)
        if match and int(match.group(1)) >= 4:
            return ["kubectl", "kustomize"], f"kubectl kustomize ({match.group(0)})"
        return None, "kubectl's kustomize is older than v4"
    return None, "no kustomize or kubectl on PATH"


def first_difference(ours, theirs, path=""):
    """Where two rendered objects first differ, and how, or None."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(set(ours) | set(theirs), key=str):
            if key not in ours:
                return f"{path}.{key}: only kustomize has it ({json.dumps(theirs[key])[:80]})"
            if key not in theirs:
                return f"{path}.{key}: only this renderer has it ({json.dumps(ours[key])[:80]})"
            difference = first_difference(ours[key], theirs[key], f"{path}.{key}")
            if difference:
                return difference
        return None
    if isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs):
            return f"{path}: {len(ours)} items here, {len(theirs)} from kustomize"
        for index, (mine, real) in enumerate(zip(ours, theirs)):
            difference = first_difference(mine, real, f"{path}[{index}]")
            if difference:
                return difference
        return None
    if ours != theirs:
        return f"{path or '(top level)'}: {json.dumps(ours)} here, {json.dumps(theirs)} from kustomize"
    return None


def compare_with_kustomize(name, directory, documents, command, tool):
    """Fails unless the real kustomize renders the same objects as `documents` (in any order)."""
    try:
        result = subprocess.run(
            command + [str(directory)], capture_output=True, text=True, timeout=120, check=False
        )
    except subprocess.TimeoutExpired:
        raise CheckError(f"{name}: {tool} did not finish within 120 s") from None
    check(result.returncode == 0, f"{name}: {tool} fails: {result.stderr.strip()}")
    theirs = {identity(document): document for document in yaml.safe_load_all(result.stdout) if document}
    ours = {identity(document): document for document in documents}
    only_ours = sorted(str(key) for key in ours.keys() - theirs.keys())
    only_theirs = sorted(str(key) for key in theirs.keys() - ours.keys())
    check(not only_ours and not only_theirs, f"{name}: rendered here but not by {tool}: {only_ours}; by {tool} but not here: {only_theirs}")
    for key, document in ours.items():
        difference = first_difference(document, theirs[key])
        check(difference is None, f"{name}: {describe(document)} is rendered otherwise by {tool}: {difference}")


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


def flag_values(arguments, flag):
    """The values given to a long option: `--flag value` or `--flag=value`, in order."""
    values = []
    for index, argument in enumerate(arguments):
        if argument == flag:
            check(index + 1 < len(arguments), f"{flag} without a value")
            values.append(arguments[index + 1])
        elif argument.startswith(flag + "="):
            values.append(argument[len(flag) + 1:])
    return values


class Overlay:
    """One rendered overlay, with look-ups across its objects."""

    def __init__(self, name, documents):
        self.name = name
        self.documents = documents

    def all(self, kind):
        return [document for document in self.documents if document["kind"] == kind]

    def get(self, kind, name):
        matches = [document for document in self.all(kind) if document["metadata"]["name"] == name]
        return matches[0] if matches else None

    def fail_unless(self, condition, message):
        check(condition, f"{self.name}: {message}")

    def workloads(self):
        return [document for document in self.documents if pod_specs(document) and document["kind"] != "Pod"]

    def gateway(self):
        deployment = self.get("Deployment", GATEWAY)
        self.fail_unless(deployment is not None, f"no Deployment {GATEWAY}")
        gateway = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == GATEWAY]
        self.fail_unless(len(gateway) == 1, f"Deployment {GATEWAY} has no container {GATEWAY}")
        return deployment, gateway[0]

    def option(self, name, default=None):
        """A gateway option as the binary takes it: the flag, else RECEPTIONIST_<OPTION> from the
        container's env, else from a ConfigMap in its envFrom, else the default."""
        _, container = self.gateway()
        values = flag_values(container.get("args") or [], "--" + name)
        if values:
            return values[-1]
        variable = "RECEPTIONIST_" + name.upper().replace("-", "_")
        for entry in container.get("env") or []:
            if entry["name"] == variable and "value" in entry:
                return entry["value"]
        for source in container.get("envFrom") or []:
            reference = source.get("configMapRef")
            if reference:
                config = self.get("ConfigMap", reference["name"])
                if config and variable in (config.get("data") or {}):
                    return config["data"][variable]
        return DEFAULTS.get(name, default)


def pod_labels(workload):
    return (workload["spec"]["template"].get("metadata") or {}).get("labels") or {}


def selects(selector, labels):
    return bool(selector) and selector.items() <= labels.items()


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


def check_single_node(overlay):
    """One gateway on the disk engine: replicas 1, Recreate, --data-dir on a PersistentVolumeClaim."""
    deployment, container = overlay.gateway()
    what = f"Deployment {GATEWAY}"
    arguments = container.get("args") or []
    overlay.fail_unless(deployment["spec"].get("replicas") == 1, f"{what}: replicas must be 1 (two gateways cannot share one data directory)")
    overlay.fail_unless(
        (deployment["spec"].get("strategy") or {}).get("type") == "Recreate",
        f"{what}: strategy must be Recreate (a rolling update would start a second gateway on the same data directory)",
    )
    for autoscaler in overlay.all("HorizontalPodAutoscaler"):
        overlay.fail_unless(autoscaler["spec"]["scaleTargetRef"]["name"] != GATEWAY, f"{what}: an autoscaler would start a second gateway on the same data directory")
    directories = flag_values(arguments, "--data-dir")
    overlay.fail_unless(directories, f"{what}: no --data-dir in its args {arguments}")
    directory = directories[-1].rstrip("/")
    overlay.fail_unless(overlay.option("engine", "memory") == "memory", f"{what}: --data-dir with --engine {overlay.option('engine')} (the gateway refuses both)")
    fsync = overlay.option("fsync", "always")
    overlay.fail_unless(fsync in ("always", "interval"), f"{what}: --fsync {fsync} is neither always nor interval")
    pod = deployment["spec"]["template"]["spec"]
    volumes = {volume["name"]: volume for volume in pod.get("volumes") or []}
    mounts = [mount for mount in container.get("volumeMounts") or [] if mount["mountPath"].rstrip("/") == directory]
    overlay.fail_unless(mounts, f"{what}: nothing is mounted at the data directory {directory}")
    volume = volumes.get(mounts[0]["name"], {})
    overlay.fail_unless(
        "persistentVolumeClaim" in volume and not mounts[0].get("readOnly"),
        f"{what}: the data directory {directory} is not a writable PersistentVolumeClaim",
    )


def redis_url(url):
    """(host, port) of redis://[:password@]host[:port][/db]."""
    match = re.fullmatch(r"redis://(?:[^@/]*@)?([A-Za-z0-9.-]+)(?::([0-9]+))?(?:/[0-9]+)?", url)
    check(match, f"--redis-url {url} is not redis://host[:port][/db]")
    return match.group(1), int(match.group(2) or 6379)


def check_cluster(overlay):
    """Gateways on the redis engine at a Redis Service, autoscaled from two, spread over nodes."""
    deployment, container = overlay.gateway()
    what = f"Deployment {GATEWAY}"
    arguments = container.get("args") or []
    overlay.fail_unless(flag_values(arguments, "--engine")[-1:] == ["redis"], f"{what}: its args {arguments} do not give --engine redis")
    overlay.fail_unless(not flag_values(arguments, "--data-dir"), f"{what}: --data-dir with --engine redis (the gateway refuses both)")
    urls = [url for value in flag_values(arguments, "--redis-url") for url in value.split(",")]
    overlay.fail_unless(urls, f"{what}: no --redis-url in its args {arguments}")
    for url in urls:
        host, port = redis_url(url.strip())
        # A Service's name (service[.namespace[.svc[.cluster.local]]]), or a StatefulSet pod's under
        # its governing Service (pod-0.service[.namespace…]).
        labels = host.split(".")
        if overlay.get("Service", labels[0]):
            service_name = labels[0]
        elif len(labels) > 1 and re.fullmatch(r".+-[0-9]+", labels[0]) and overlay.get("Service", labels[1]):
            service_name = labels[1]
        else:
            raise CheckError(f"{overlay.name}: {what}: --redis-url {url} names {host}, which is no Service of the overlay (nor a pod under one)")
        service = overlay.get("Service", service_name)
        overlay.fail_unless(any(candidate["port"] == port for candidate in service["spec"]["ports"]), f"{what}: --redis-url {url}: Service {service_name} has no port {port}")
        check_redis(overlay, service)

    replicas = deployment["spec"].get("replicas")
    autoscalers = [a for a in overlay.all("HorizontalPodAutoscaler") if a["spec"]["scaleTargetRef"]["kind"] == "Deployment" and a["spec"]["scaleTargetRef"]["name"] == GATEWAY]
    overlay.fail_unless(autoscalers, f"{what}: no HorizontalPodAutoscaler scales it")
    minimum = autoscalers[0]["spec"].get("minReplicas", 1)
    overlay.fail_unless(minimum >= 2, f"HorizontalPodAutoscaler {autoscalers[0]['metadata']['name']}: minReplicas {minimum}: a cluster needs two gateways at least")
    overlay.fail_unless(replicas is None or replicas >= 2, f"{what}: replicas {replicas}: a cluster needs two gateways at least")
    overlay.fail_unless((deployment["spec"].get("strategy") or {}).get("type", "RollingUpdate") == "RollingUpdate", f"{what}: a cluster's gateways update one at a time (RollingUpdate)")

    labels = pod_labels(deployment)
    spread = deployment["spec"]["template"]["spec"].get("topologySpreadConstraints") or []
    by_key = {constraint["topologyKey"]: constraint for constraint in spread}
    for key in ("kubernetes.io/hostname", "topology.kubernetes.io/zone"):
        overlay.fail_unless(key in by_key, f"{what}: no topologySpreadConstraint over {key}")
        overlay.fail_unless(selects((by_key[key].get("labelSelector") or {}).get("matchLabels"), labels), f"{what}: the topologySpreadConstraint over {key} does not select the gateway's pods")
    overlay.fail_unless(
        by_key["topology.kubernetes.io/zone"]["whenUnsatisfiable"] == "ScheduleAnyway",
        f"{what}: the spread over zones must be ScheduleAnyway (a cluster with one zone, or a full one, would leave pods pending)",
    )

    budgets = [b for b in overlay.all("PodDisruptionBudget") if selects(b["spec"]["selector"].get("matchLabels"), labels)]
    overlay.fail_unless(budgets, f"{what}: no PodDisruptionBudget selects the gateway's pods")
    spec = budgets[0]["spec"]
    overlay.fail_unless(
        ("maxUnavailable" in spec and str(spec["maxUnavailable"]) not in ("0", "0%")) or ("minAvailable" in spec and isinstance(spec["minAvailable"], int) and spec["minAvailable"] < minimum),
        f"PodDisruptionBudget {budgets[0]['metadata']['name']}: allows no disruption, which blocks every node drain",
    )


def check_redis(overlay, service):
    """Redis behind its headless Service: a StatefulSet with a volume per pod and an append-only
    file synced on every write."""
    name = service["metadata"]["name"]
    sets = [s for s in overlay.all("StatefulSet") if selects(service["spec"].get("selector"), pod_labels(s))]
    overlay.fail_unless(sets, f"Service {name}: selects no StatefulSet's pods (Redis runs as a StatefulSet with a volume)")
    statefulset = sets[0]
    what = f"StatefulSet {statefulset['metadata']['name']}"
    overlay.fail_unless(statefulset["spec"].get("serviceName") == name, f"{what}: serviceName is not {name}")
    overlay.fail_unless(service["spec"].get("clusterIP") == "None", f"Service {name}: the StatefulSet's governing Service must be headless (clusterIP: None)")
    redis = [c for c in statefulset["spec"]["template"]["spec"]["containers"] if "redis" in c["name"]]
    overlay.fail_unless(len(redis) == 1, f"{what}: no container named redis")
    redis = redis[0]
    arguments = [str(argument) for argument in (redis.get("command") or []) + (redis.get("args") or [])]
    for flag, value in (("--appendonly", "yes"), ("--appendfsync", "always")):
        overlay.fail_unless(flag_values(arguments, flag)[-1:] == [value], f"{what}: Redis must run with {flag} {value}, as deploy/compose.yaml does")
    directory = (flag_values(arguments, "--dir")[-1:] or ["/data"])[0].rstrip("/")
    claims = {template["metadata"]["name"] for template in statefulset["spec"].get("volumeClaimTemplates") or []}
    overlay.fail_unless(
        any(mount["mountPath"].rstrip("/") == directory and mount["name"] in claims for mount in redis.get("volumeMounts") or []),
        f"{what}: Redis's directory {directory} is not on a volume of its volumeClaimTemplates",
    )


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


def check_kubernetes(k8s, report=print):
    """Renders base and every overlay, compares with the real kustomize where there is one,
    validates each document and checks each variant."""
    k8s = Path(k8s)
    for overlay in ("base",) + OVERLAYS:
        check((k8s / overlay / "kustomization.yaml").is_file(), f"{k8s}: no {overlay}/kustomization.yaml")
    command, tool = real_kustomize()
    folders = sorted(path.parent for path in k8s.glob("*/kustomization.yaml"))
    overlays = []
    for folder in folders:
        name = folder.name
        check_listed(folder)
        documents = render(folder)
        if command:
            compare_with_kustomize(name, folder, documents, command, tool)
        for document in documents:
            check_schema(name, document)
        if name == "base":
            continue
        overlay = Overlay(name, documents)
        check_common(overlay)
        if name == SINGLE_NODE:
            check_single_node(overlay)
        elif name == CLUSTER:
            check_cluster(overlay)
        overlays.append(overlay)
        kinds = ", ".join(sorted({document["kind"] for document in documents}))
        report(f"{name}: {len(documents)} objects valid for Kubernetes {KUBERNETES_VERSION} ({kinds})")
    version = check_version(k8s, overlays)
    if version:
        report(f"gateway image tagged {version}, this tree's version")
    if command:
        report(f"rendered as {tool} renders {', '.join(folder.name for folder in folders)}")
    else:
        report(f"rendered here only, not compared with kustomize: {tool}")


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


def main(arguments):
    if len(arguments) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    directory = Path(arguments[0])
    try:
        if (directory / "k8s").is_dir():
            check_kubernetes(directory / "k8s")
            if (directory / "compose.yaml").is_file():
                check_compose(directory / "compose.yaml")
        else:
            check_kubernetes(directory)
    except CheckError as error:
        print(f"FAIL: {error}", file=sys.stderr)
        return 1
    print("manifests: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
