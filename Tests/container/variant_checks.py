"""The rules of each variant of the gateway: single-node (the disk engine, one replica on a
volume) and cluster (the redis engine at a Redis StatefulSet, autoscaled, spread over nodes)."""

import re

from manifest_errors import CheckError, check
from rendered_overlay import GATEWAY, flag_values, pod_labels, selects

# The overlays, each a variant of the gateway that `kubectl apply -k` deploys.
SINGLE_NODE = "single-node"
CLUSTER = "cluster"
OVERLAYS = (SINGLE_NODE, CLUSTER)


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
