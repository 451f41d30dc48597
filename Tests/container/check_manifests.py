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

import sys
from pathlib import Path

from kustomize_render import compare_with_kustomize, real_kustomize, render
from manifest_checks import KUBERNETES_VERSION, check_common, check_compose, check_listed, check_schema, check_version
from manifest_errors import CheckError, check
from rendered_overlay import Overlay
from variant_checks import CLUSTER, OVERLAYS, SINGLE_NODE, check_cluster, check_single_node


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
