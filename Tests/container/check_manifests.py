"""Checks the deployment manifests in deploy/: the Kubernetes ones are valid against the
Kubernetes API's schemas (kubernetes-validate, which carries them, so this runs offline), they
refer to each other consistently, and they give a graceful stop more time than the gateway's drain.

Usage: python check_manifests.py DEPLOY_DIR
"""

import sys
from pathlib import Path

import kubernetes_validate
import yaml

# The Kubernetes API release the manifests are checked against: 1.30, which deployment.yaml's
# comments assume (preStop sleep). Strict: a field the API does not know, a typo, fails too.
KUBERNETES_VERSION = "1.30.0"
# Not Kubernetes API objects, so the API's schemas have nothing to say about them; check_kubernetes
# checks the Kustomization's resource list itself.
NOT_API_OBJECTS = {("kustomize.config.k8s.io/v1beta1", "Kustomization")}


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def seconds(text):
    """'30s' or '1m' or 30 as seconds."""
    text = str(text)
    if text.endswith("m"):
        return float(text[:-1]) * 60
    return float(text.rstrip("s"))


def check_schema(name, document):
    """Fails unless the document is a valid Kubernetes object of KUBERNETES_VERSION's API."""
    if (document.get("apiVersion"), document["kind"]) in NOT_API_OBJECTS:
        return
    try:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        where = ".".join(str(part) for part in error.path) or "(top level)"
        fail(f"{name}: {document['kind']} is not valid for Kubernetes {error.version}: {where}: {error.message}")
    except kubernetes_validate.SchemaNotFoundError as error:
        fail(f"{name}: {error.message}")


def check_kubernetes(directory):
    documents = {}
    for path in sorted(directory.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            check(isinstance(document, dict) and "kind" in document, f"{path.name}: not a manifest")
            check_schema(path.name, document)
            documents[document["kind"]] = document
    kustomization = documents.pop("Kustomization")
    listed = set(kustomization["resources"])
    present = {path.name for path in directory.glob("*.yaml")} - {"kustomization.yaml"}
    check(listed == present, f"kustomization lists {sorted(listed)}, the folder has {sorted(present)}")
    for kind in ("ConfigMap", "Secret", "Deployment", "Service", "PodDisruptionBudget"):
        check(kind in documents, f"no {kind}")

    config = documents["ConfigMap"]["data"]
    secret_keys = set(documents["Secret"]["stringData"])
    deployment = documents["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    check(deployment["spec"]["selector"]["matchLabels"].items() <= labels.items(), "Deployment selector")
    check(documents["Service"]["spec"]["selector"].items() <= labels.items(), "Service selector")
    check(documents["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= labels.items(), "PDB selector")

    pod = deployment["spec"]["template"]["spec"]
    drain = float(config["RECEPTIONIST_DRAIN_TIMEOUT"])
    check(pod["terminationGracePeriodSeconds"] > drain, "terminationGracePeriodSeconds must exceed the drain timeout")
    check(pod["securityContext"]["runAsNonRoot"] is True, "runAsNonRoot")
    (container,) = pod["containers"]
    check(container["securityContext"]["readOnlyRootFilesystem"] is True, "readOnlyRootFilesystem")
    check(container["securityContext"]["allowPrivilegeEscalation"] is False, "allowPrivilegeEscalation")
    check("requests" in container["resources"], "resource requests")
    check(container["readinessProbe"]["httpGet"]["path"] == "/readyz", "readiness probe on /readyz")
    liveness = container["livenessProbe"]
    check(liveness["httpGet"]["path"] == "/healthz", "liveness probe on /healthz")
    check(liveness["periodSeconds"] * liveness["failureThreshold"] > drain, "liveness must tolerate a whole drain")
    port_names = {port["name"] for port in container["ports"]}
    check(container["readinessProbe"]["httpGet"]["port"] in port_names, "readiness probe port")
    check(documents["Service"]["spec"]["ports"][0]["targetPort"] in port_names, "Service targetPort")
    check(int(config["RECEPTIONIST_PORT"]) == container["ports"][0]["containerPort"], "containerPort and RECEPTIONIST_PORT")
    for variable in container.get("env", []):
        reference = variable.get("valueFrom", {}).get("secretKeyRef")
        if reference:
            check(reference["key"] in secret_keys, f"secret key {reference['key']}")
    for volume in pod.get("volumes", []):
        for item in volume.get("secret", {}).get("items", []):
            check(item["key"] in secret_keys, f"secret key {item['key']}")


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


def main():
    deploy = Path(sys.argv[1])
    check_kubernetes(deploy / "k8s")
    check_compose(deploy / "compose.yaml")
    print("manifests: ok")


if __name__ == "__main__":
    main()
