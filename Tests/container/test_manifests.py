"""Tests of check_manifests.py: the manifests in deploy/ pass it, and each way of breaking them
that matters is rejected with a message that says what is wrong. Runs offline, in a second or so:

    python -m pytest Tests/container/test_manifests.py

Where kustomize (or a kubectl carrying kustomize v4 or later) is on PATH, the renderer is also
checked against it; elsewhere those tests are skipped.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

import check_manifests  # noqa: E402  (imported from this folder)
from kustomize_render import compare_with_kustomize, real_kustomize, render, split_image, strategic_merge  # noqa: E402
from manifest_checks import BUILD_INFO  # noqa: E402
from manifest_errors import CheckError  # noqa: E402

KUSTOMIZE, KUSTOMIZE_TOOL = real_kustomize()
needs_kustomize = pytest.mark.skipif(KUSTOMIZE is None, reason=f"no real kustomize here: {KUSTOMIZE_TOOL}")


@pytest.fixture
def k8s(tmp_path):
    """A copy of deploy/k8s to break (outside the repository, so the version check is skipped)."""
    copy = tmp_path / "deploy" / "k8s"
    shutil.copytree(REPO / "deploy" / "k8s", copy)
    return copy


def edit(path, change):
    """Loads a one-document YAML file, lets `change` modify it in place, and writes it back."""
    document = yaml.safe_load(path.read_text())
    change(document)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def gateway_container(patch):
    return patch["spec"]["template"]["spec"]["containers"][0]


def rejected(k8s):
    """The message check_kubernetes fails with (the test fails if it passes)."""
    with pytest.raises(CheckError) as failure:
        check_manifests.check_kubernetes(k8s, report=lambda line: None)
    return str(failure.value)


def test_the_manifests_pass():
    lines = []
    check_manifests.check_kubernetes(REPO / "deploy" / "k8s", report=lines.append)
    assert any(line.startswith("single-node: ") for line in lines)
    assert any(line.startswith("cluster: ") for line in lines)
    assert any("this tree's version" in line for line in lines), lines


def test_the_command_line_passes_deploy_and_deploy_k8s():
    for directory in ("deploy", "deploy/k8s"):
        result = subprocess.run(
            [sys.executable, str(HERE / "check_manifests.py"), directory],
            cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().endswith("manifests: ok")


def test_the_command_line_fails_with_a_message(k8s):
    edit(k8s / "cluster" / "hpa.yaml", lambda hpa: hpa["spec"]["scaleTargetRef"].update(name="gateway"))
    result = subprocess.run(
        [sys.executable, str(HERE / "check_manifests.py"), str(k8s)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("FAIL: cluster: HorizontalPodAutoscaler receptionist: scaleTargetRef names Deployment gateway")


# -- Broken manifests ---------------------------------------------------------------------------

def test_an_unknown_field_fails(k8s):
    edit(k8s / "single-node" / "deployment-patch.yaml", lambda patch: patch["spec"].update(replica=2))
    message = rejected(k8s)
    assert "single-node: Deployment receptionist is not valid for Kubernetes 1.30" in message
    assert "'replica' was unexpected" in message


def test_an_unknown_field_in_the_base_fails(k8s):
    edit(k8s / "base" / "deployment.yaml", lambda deployment: gateway_container(deployment)["readinessProbe"].update(periodSecond=5))
    assert "'periodSecond' was unexpected" in rejected(k8s)


def test_a_field_of_the_wrong_type_fails(k8s):
    # What Tests/container/run.sh breaks too.
    edit(k8s / "single-node" / "deployment-patch.yaml", lambda patch: patch["spec"].update(replicas="2"))
    assert "spec.replicas: '2' is not of type 'integer'" in rejected(k8s)


def test_an_untagged_image_fails(k8s):
    edit(k8s / "base" / "kustomization.yaml", lambda kustomization: kustomization.pop("images"))
    assert "container receptionist: image receptionist has no version tag" in rejected(k8s)


def test_the_latest_tag_fails(k8s):
    edit(k8s / "base" / "kustomization.yaml", lambda kustomization: kustomization["images"][0].update(newTag="latest"))
    assert "image receptionist:latest: the tag latest is not a version" in rejected(k8s)


def test_an_untagged_redis_image_fails(k8s):
    edit(k8s / "cluster" / "kustomization.yaml", lambda kustomization: kustomization.pop("images"))
    assert "StatefulSet redis, container redis: image redis has no version tag" in rejected(k8s)


def test_an_autoscaler_of_a_missing_deployment_fails(k8s):
    edit(k8s / "cluster" / "hpa.yaml", lambda hpa: hpa["spec"]["scaleTargetRef"].update(name="receptionist-gateway"))
    message = rejected(k8s)
    assert "HorizontalPodAutoscaler receptionist: scaleTargetRef names Deployment receptionist-gateway (apps/v1), which the overlay does not define" in message


def test_an_autoscaler_from_one_replica_fails(k8s):
    edit(k8s / "cluster" / "hpa.yaml", lambda hpa: hpa["spec"].update(minReplicas=1))
    assert "minReplicas 1: a cluster needs two gateways at least" in rejected(k8s)


def test_a_rolling_update_on_the_disk_engine_fails(k8s):
    edit(k8s / "single-node" / "deployment-patch.yaml", lambda patch: patch["spec"].update(strategy={"type": "RollingUpdate"}))
    assert "strategy must be Recreate" in rejected(k8s)


def test_two_replicas_on_the_disk_engine_fail(k8s):
    edit(k8s / "single-node" / "deployment-patch.yaml", lambda patch: patch["spec"].update(replicas=2))
    assert "replicas must be 1" in rejected(k8s)


def test_a_data_directory_off_the_volume_fails(k8s):
    def move(patch):
        gateway_container(patch)["args"] = ["serve", "--data-dir", "/var/lib/elsewhere"]
    edit(k8s / "single-node" / "deployment-patch.yaml", move)
    assert "nothing is mounted at the data directory /var/lib/elsewhere" in rejected(k8s)


def test_a_data_directory_on_an_empty_dir_fails(k8s):
    def forget(patch):
        patch["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    edit(k8s / "single-node" / "deployment-patch.yaml", forget)
    assert "the data directory /var/lib/receptionist is not a writable PersistentVolumeClaim" in rejected(k8s)


def test_a_single_node_without_a_data_directory_fails(k8s):
    edit(k8s / "single-node" / "deployment-patch.yaml", lambda patch: gateway_container(patch).update(args=["serve"]))
    assert "no --data-dir in its args" in rejected(k8s)


def test_a_claim_the_overlay_lacks_fails(k8s):
    edit(k8s / "single-node" / "kustomization.yaml", lambda kustomization: kustomization["resources"].remove("pvc.yaml"))
    (k8s / "single-node" / "pvc.yaml").unlink()
    assert "volume data claims receptionist-data, which the overlay does not define" in rejected(k8s)


def test_a_cluster_on_the_memory_engine_fails(k8s):
    edit(k8s / "cluster" / "deployment-patch.yaml", lambda patch: gateway_container(patch).update(args=["serve", "--redis-url", "redis://redis:6379/0"]))
    assert "do not give --engine redis" in rejected(k8s)


def test_a_redis_url_off_the_redis_service_fails(k8s):
    edit(k8s / "cluster" / "deployment-patch.yaml", lambda patch: gateway_container(patch).update(args=["serve", "--engine", "redis", "--redis-url", "redis://cache:6379/0"]))
    assert "--redis-url redis://cache:6379/0 names cache, which is no Service of the overlay" in rejected(k8s)


def test_a_redis_url_on_the_wrong_port_fails(k8s):
    edit(k8s / "cluster" / "deployment-patch.yaml", lambda patch: gateway_container(patch).update(args=["serve", "--engine", "redis", "--redis-url", "redis://redis:6380/0"]))
    assert "Service redis has no port 6380" in rejected(k8s)


def test_a_redis_url_of_the_statefulset_pod_passes(k8s):
    edit(k8s / "cluster" / "deployment-patch.yaml", lambda patch: gateway_container(patch).update(args=["serve", "--engine", "redis", "--redis-url", "redis://redis-0.redis.default.svc.cluster.local:6379/0"]))
    check_manifests.check_kubernetes(k8s, report=lambda line: None)


def test_redis_without_fsync_on_every_write_fails(k8s):
    def relax(statefulset):
        arguments = statefulset["spec"]["template"]["spec"]["containers"][0]["args"]
        arguments[arguments.index("--appendfsync") + 1] = "everysec"
    edit(k8s / "cluster" / "redis-statefulset.yaml", relax)
    assert "Redis must run with --appendfsync always" in rejected(k8s)


def test_redis_off_its_volume_fails(k8s):
    def move(statefulset):
        arguments = statefulset["spec"]["template"]["spec"]["containers"][0]["args"]
        arguments[arguments.index("--dir") + 1] = "/tmp"
    edit(k8s / "cluster" / "redis-statefulset.yaml", move)
    assert "Redis's directory /tmp is not on a volume of its volumeClaimTemplates" in rejected(k8s)


def test_a_redis_service_with_a_cluster_ip_fails(k8s):
    edit(k8s / "cluster" / "redis-service.yaml", lambda service: service["spec"].pop("clusterIP"))
    assert "must be headless" in rejected(k8s)


def test_a_strict_spread_over_zones_fails(k8s):
    def strict(patch):
        patch["spec"]["template"]["spec"]["topologySpreadConstraints"][1]["whenUnsatisfiable"] = "DoNotSchedule"
    edit(k8s / "cluster" / "deployment-patch.yaml", strict)
    assert "the spread over zones must be ScheduleAnyway" in rejected(k8s)


def test_no_spread_over_nodes_fails(k8s):
    edit(k8s / "cluster" / "deployment-patch.yaml", lambda patch: patch["spec"]["template"]["spec"]["topologySpreadConstraints"].pop(0))
    assert "no topologySpreadConstraint over kubernetes.io/hostname" in rejected(k8s)


def test_a_grace_period_shorter_than_the_pause_and_drain_fails(k8s):
    edit(k8s / "cluster" / "deployment-patch.yaml", lambda patch: patch["spec"]["template"]["spec"].update(terminationGracePeriodSeconds=14))
    assert "terminationGracePeriodSeconds (14) must exceed the preStop pause (5 s) plus the drain timeout (10 s)" in rejected(k8s)


def test_a_budget_that_blocks_node_drains_fails(k8s):
    edit(k8s / "base" / "pdb.yaml", lambda budget: budget["spec"].update(maxUnavailable=0))
    assert "allows no disruption" in rejected(k8s)


def test_buffering_in_the_ingress_fails(k8s):
    edit(k8s / "base" / "ingress.yaml", lambda ingress: ingress["metadata"]["annotations"].pop("nginx.ingress.kubernetes.io/proxy-buffering"))
    assert 'proxy-buffering is not "off": SSE events would wait' in rejected(k8s)


def test_an_ingress_timeout_below_the_ping_fails(k8s):
    edit(k8s / "base" / "ingress.yaml", lambda ingress: ingress["metadata"]["annotations"].update({"nginx.ingress.kubernetes.io/proxy-read-timeout": "30"}))
    assert "proxy-read-timeout (30 s) must exceed the quiet a stream may have (40 s" in rejected(k8s)


def test_an_ingress_timeout_the_controller_ignores_fails(k8s):
    edit(k8s / "base" / "ingress.yaml", lambda ingress: ingress["metadata"]["annotations"].update({"nginx.ingress.kubernetes.io/proxy-send-timeout": "120s"}))
    assert "proxy-send-timeout: '120s' is not a value ingress-nginx takes" in rejected(k8s)


def test_a_misspelt_ingress_annotation_fails(k8s):
    def misspell(ingress):
        annotations = ingress["metadata"]["annotations"]
        annotations["nginx.ingress.kubernetes.io/proxy-read-timout"] = annotations.pop("nginx.ingress.kubernetes.io/proxy-read-timeout")
    edit(k8s / "base" / "ingress.yaml", misspell)
    assert "proxy-read-timout is not an ingress-nginx annotation" in rejected(k8s)


def test_an_ingress_to_a_missing_port_fails(k8s):
    def repoint(ingress):
        ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["port"] = {"name": "web"}
    edit(k8s / "base" / "ingress.yaml", repoint)
    assert "routes to port {'name': 'web'} of Service receptionist, which it does not have" in rejected(k8s)


def test_a_file_left_out_of_the_kustomization_fails(k8s):
    shutil.copy(k8s / "cluster" / "hpa.yaml", k8s / "cluster" / "hpa-old.yaml")
    assert "hpa-old.yaml: not listed in its kustomization.yaml" in rejected(k8s)


def test_a_kustomize_field_the_renderer_lacks_fails(k8s):
    edit(k8s / "cluster" / "kustomization.yaml", lambda kustomization: kustomization.update(namePrefix="prod-"))
    assert "field(s) ['namePrefix'] are not supported by this renderer" in rejected(k8s)


def test_a_patch_of_a_missing_resource_fails(k8s):
    edit(k8s / "cluster" / "deployment-patch.yaml", lambda patch: patch["metadata"].update(name="gateway"))
    assert "patches Deployment gateway (apps/v1), which no resource defines" in rejected(k8s)


def test_an_image_behind_the_tree_version_fails(k8s):
    # A copy laid out as in the repository, with a BuildInfo.swift of a newer version.
    build_info = k8s.parent.parent / BUILD_INFO
    build_info.parent.mkdir(parents=True)
    build_info.write_text('public enum BuildInfo {\n    public static let version = "9.9.9"\n}\n')
    tag = yaml.safe_load((k8s / "base" / "kustomization.yaml").read_text())["images"][0]["newTag"]
    assert f"the gateway's image is tagged {tag}, but this tree builds 9.9.9" in rejected(k8s)


# -- The renderer ---------------------------------------------------------------------------------

BASE_DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "x"},
    "spec": {
        "selector": {"matchLabels": {"a": "b"}},
        "template": {
            "metadata": {"labels": {"a": "b"}},
            "spec": {
                "containers": [
                    {"name": "c1", "image": "i", "args": ["a", "b"], "ports": [{"containerPort": 1}],
                     "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "1"}, {"name": "C", "value": "1"}]},
                    {"name": "c2", "image": "registry:5000/j:1.0", "resources": {"limits": {"cpu": "1"}}},
                ],
            },
        },
    },
}
PATCH = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "x"},
    "spec": {
        "replicas": 3,
        "template": {
            "spec": {
                "containers": [
                    {"name": "c3", "image": "k"},
                    {"name": "c1", "args": ["z"], "ports": [{"containerPort": 2}],
                     "env": [{"name": "D", "value": "2"}, {"name": "B", "value": "2"}, {"name": "E", "value": "2"}]},
                    {"name": "c2", "resources": None},
                ],
            },
        },
    },
}


def write_kustomizations(root):
    """A base and an overlay exercising every part of the renderer; returns the overlay's folder."""
    (root / "base").mkdir()
    (root / "overlay").mkdir()
    (root / "base" / "deployment.yaml").write_text(yaml.safe_dump(BASE_DEPLOYMENT))
    (root / "base" / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": ["deployment.yaml"], "images": [{"name": "i", "newTag": "2.0"}],
    }))
    (root / "overlay" / "patch.yaml").write_text(yaml.safe_dump(PATCH))
    (root / "overlay" / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": ["../base"], "patches": [{"path": "patch.yaml"}],
        "images": [{"name": "registry:5000/j", "newName": "other/j"}, {"name": "k", "digest": "sha256:" + "0" * 64}],
    }))
    return root / "overlay"


def test_the_renderer_merges_patches_and_sets_images(tmp_path):
    (deployment,) = render(write_kustomizations(tmp_path))
    assert deployment["spec"]["replicas"] == 3
    c3, c1, c2 = deployment["spec"]["template"]["spec"]["containers"]
    assert c3 == {"name": "c3", "image": "k@sha256:" + "0" * 64}
    # A patch's list items first, merged with the original's of the same key, then the rest.
    assert [variable["name"] for variable in c1["env"]] == ["D", "B", "E", "A", "C"]
    assert c1["env"][1]["value"] == "2"
    assert c1["args"] == ["z"]
    assert c1["ports"] == [{"containerPort": 2}, {"containerPort": 1}]
    assert c1["image"] == "i:2.0"
    assert c2 == {"name": "c2", "image": "other/j:1.0"}


@needs_kustomize
def test_the_renderer_renders_what_kustomize_renders(tmp_path):
    overlay = write_kustomizations(tmp_path)
    compare_with_kustomize("overlay", overlay, render(overlay), KUSTOMIZE, KUSTOMIZE_TOOL)


@needs_kustomize
def test_a_rendering_unlike_kustomize_fails(tmp_path):
    overlay = write_kustomizations(tmp_path)
    documents = render(overlay)
    documents[0]["spec"]["template"]["spec"]["containers"][1]["env"].reverse()
    with pytest.raises(CheckError, match=r"rendered otherwise by .*\.env\[0\]\.name: \"C\" here, \"D\" from kustomize"):
        compare_with_kustomize("overlay", overlay, documents, KUSTOMIZE, KUSTOMIZE_TOOL)


def test_an_old_kubectl_is_not_compared_with(tmp_path, monkeypatch):
    # Debian bookworm's kubectl (1.20) carries kustomize v2, which reads no `patches`.
    fake = tmp_path / "kubectl"
    fake.write_text("#!/bin/sh\necho '{\"clientVersion\": {\"gitVersion\": \"v1.20.2\"}}'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert real_kustomize() == (None, "kubectl's kustomize is older than v4")


def test_a_patch_item_without_its_merge_key_fails():
    with pytest.raises(CheckError, match="has no name, the key it merges by"):
        strategic_merge(BASE_DEPLOYMENT, {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}})


def test_a_patch_directive_fails():
    with pytest.raises(CheckError, match=r"patch directive \$patch"):
        strategic_merge(BASE_DEPLOYMENT, {"spec": {"$patch": "replace"}})


@pytest.mark.parametrize(
    ("reference", "parts"),
    [
        ("receptionist", ("receptionist", None, None)),
        ("receptionist:0.8.0", ("receptionist", "0.8.0", None)),
        ("registry:5000/team/receptionist", ("registry:5000/team/receptionist", None, None)),
        ("registry:5000/receptionist:0.8.0@sha256:ab", ("registry:5000/receptionist", "0.8.0", "sha256:ab")),
    ],
)
def test_image_references_split(reference, parts):
    assert split_image(reference) == parts
