"""One rendered overlay, with look-ups across its objects: the gateway's Deployment and
container, a gateway option wherever it is set, and which pods a selector selects."""

from kustomize_render import pod_specs
from manifest_errors import check

# The gateway's own objects are all named so.
GATEWAY = "receptionist"
# The gateway's defaults (`receptionist serve --help`) for the options the checks need.
DEFAULTS = {"port": "8080", "drain-timeout": "10", "ping-interval": "30", "ping-timeout": "10", "sse-heartbeat": "15"}


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
