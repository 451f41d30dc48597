"""The part of kustomize the manifests in deploy/k8s use, rendered here (so the checks run where
no kustomize is installed), and the comparison with a real kustomize, or a kubectl carrying
kustomize v4 or later, where one is on PATH."""

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from manifest_errors import CheckError, check


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
