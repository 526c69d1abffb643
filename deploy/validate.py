#!/usr/bin/env python3
"""Validates silverline's deployment manifests (deploy/k8s), offline.

    python deploy/validate.py [--k8s-versions 1.31,1.37] [--counts FILE] [--values V] [PATH ...]
    python deploy/validate.py render-configmap > deploy/k8s/configmap.yaml

PATH defaults to every *.yaml under deploy/k8s, the render of the shipped
dataset's values (deploy/render.py); --values names the values the files were
rendered from (default: the shipped ones). Each YAML document is checked:

  schema     Kubernetes kinds against the JSON schemas bundled in the
             `kubernetes-validate` package, strict (an unknown field is an
             error), for each Kubernetes version asked for. Argo kinds
             (argoproj.io/*) against a JSON schema derived from the pydantic
             models of the `hera` package (generated from Argo Workflows'
             own OpenAPI spec), made strict the same way. A kind with no
             schema is a failure, not a warning.
  contract   silverline's exit-code contract: the CronJob retries only exit
             codes 3 and 5, and runs 4 again uncounted (a concurrent run
             committed the drop: the rerun exits 0) (podFailurePolicy,
             restartPolicy Never, Forbid); the Argo template retries only
             3, 5 and 4, fans out with withParam
             under a parallelism limit and has an exit handler that alerts;
             the CronWorkflow starts that template with the contributors;
             every image is pinned by digest; the workbench runs `serve`
             behind its proxy, never --insecure-local; a NetworkPolicy
             selects every pod.
  dataset    the files are what render.py makes of the values (no drift),
             and a second dataset's values (tests/fixture in selftest)
             render to the right objects: one CronJob per contributor, the
             contributor list in the CronWorkflow, its config files in its
             ConfigMap.
  refs       every template, ServiceAccount, ConfigMap (and key), Secret and
             volume a manifest names exists among the documents checked;
             {{inputs.parameters.x}} / {{workflow.parameters.x}} are declared.
  configmap  the dataset's ConfigMap holds exactly its config files
             (render-configmap prints it).
  wrapper    the CronJob's shell wrapper, run with a stub silverline: the
             drop id is the previous month (or DROP), exit codes pass through.
  check-config  if a silverline binary is found (SILVERLINE_BIN, or a cargo
             target dir), `silverline check-config` on the ConfigMap's files
             with the env ConfigMap's overrides applied; skipped otherwise.
  dockerfile the Dockerfile's stages, user, entrypoint and build context
             (only when no PATH is given).

    python deploy/validate.py selftest

runs the negative controls instead: each of a list of mutations of the real
manifests (and Dockerfile) must make the checks fail.

Prints one line per check and, last, `manifests: N passed, M failed`.
Exit status: 0 if nothing failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

import render

DEPLOY = render.DEPLOY
REPO = render.REPO
K8S_DIR = render.DEFAULT_OUT
CONFIG_MOUNT = render.CONFIG_MOUNT

DEFAULT_K8S_VERSIONS = "1.31,1.37"


# --------------------------------------------------------------------------
# results


class Results:
    def __init__(self, quiet: bool = False) -> None:
        self.passed = 0
        self.failed = 0
        self.skipped = 0
        self.quiet = quiet
        self.failures: list[str] = []

    def _say(self, line: str) -> None:
        if not self.quiet:
            print(line, flush=True)

    def ok(self, what: str) -> None:
        self.passed += 1
        self._say(f"PASS {what}")

    def fail(self, what: str, why: str) -> None:
        self.failed += 1
        self.failures.append(f"{what}: {why}")
        self._say(f"FAIL {what}: {why}")

    def skip(self, what: str, why: str) -> None:
        self.skipped += 1
        self._say(f"SKIP {what}: {why}")

    def check(self, what: str, problems: list[str]) -> None:
        if problems:
            self.fail(what, "; ".join(problems))
        else:
            self.ok(what)


class Doc:
    """One YAML document of a manifest file."""

    def __init__(self, path: Path, index: int, body: dict) -> None:
        self.path = path
        self.index = index
        self.body = body

    @property
    def kind(self) -> str:
        return str(self.body.get("kind", "?"))

    @property
    def name(self) -> str:
        return str((self.body.get("metadata") or {}).get("name", "?"))

    @property
    def api_version(self) -> str:
        return str(self.body.get("apiVersion", "?"))

    def label(self) -> str:
        try:
            shown = self.path.relative_to(REPO)
        except ValueError:
            shown = self.path
        return f"{shown} {self.kind}/{self.name}"


def load_docs(paths: list[Path], results: Results) -> list[Doc]:
    docs: list[Doc] = []
    for path in paths:
        try:
            bodies = [b for b in yaml.safe_load_all(path.read_text()) if b is not None]
        except (OSError, yaml.YAMLError) as err:
            results.fail(f"{path} yaml", str(err).replace("\n", " "))
            continue
        bad = [i for i, b in enumerate(bodies) if not isinstance(b, dict)]
        if bad or not bodies:
            results.fail(f"{path} yaml", "every document must be a mapping, and there must be one")
            continue
        results.ok(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path} yaml ({len(bodies)} documents)")
        docs.extend(Doc(path, i, b) for i, b in enumerate(bodies))
    return docs


# --------------------------------------------------------------------------
# schemas


def strict(schema):
    """Returns the schema with additionalProperties: false on every object that lists properties."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


_ARGO_VALIDATORS: dict[str, object] = {}


def argo_validator(kind: str):
    """A jsonschema validator for an Argo kind, from hera's models, cached on disk per hera version."""
    if kind in _ARGO_VALIDATORS:
        return _ARGO_VALIDATORS[kind]
    import jsonschema
    from hera import _version as hera_version
    from hera.workflows import models

    model = getattr(models, kind, None)
    if model is None or not hasattr(model, "model_json_schema"):
        _ARGO_VALIDATORS[kind] = None
        return None
    cache_dir = Path(os.environ.get("SILVERLINE_DEPLOY_SCHEMA_CACHE", tempfile.gettempdir()))
    version = getattr(hera_version, "version", None) or getattr(hera_version, "__version__", "unknown")
    # keyed by hera's version and this file's content: any change to how the schema is derived rebuilds it
    this = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    cache = cache_dir / f"silverline-argo-{kind}-hera-{version}-{this}.schema.json"
    for stale in cache_dir.glob(f"silverline-argo-{kind}-hera-*.schema.json"):
        if stale != cache:
            stale.unlink(missing_ok=True)
    try:
        schema = json.loads(cache.read_text())
    except (OSError, ValueError):
        schema = strict(model.model_json_schema(by_alias=True, mode="validation"))
        # Kubernetes accepts a Quantity as a number too (cpu: 1); hera types it as a string only.
        if "Quantity" in schema.get("$defs", {}):
            schema["$defs"]["Quantity"] = {"anyOf": [{"type": "string"}, {"type": "number"}]}
        schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind", "metadata", "spec"})
        schema["properties"]["apiVersion"] = {"const": "argoproj.io/v1alpha1"}
        schema["properties"]["kind"] = {"const": kind}
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(schema))
            tmp.replace(cache)
        except OSError:
            pass
    validator = jsonschema.Draft202012Validator(schema)
    _ARGO_VALIDATORS[kind] = validator
    return validator


def deepest(err):
    """The most specific error under an anyOf/oneOf (pydantic's schemas wrap every field in anyOf [T, null])."""
    while err.context:
        err = max(err.context, key=lambda e: (len(e.absolute_path), e.validator != "type"))
    return err


def schema_errors(validator, body: dict, limit: int = 5) -> list[str]:
    errors = sorted(validator.iter_errors(body), key=lambda e: [str(p) for p in e.absolute_path])
    out = []
    for err in errors[:limit]:
        err = deepest(err)
        where = ".".join(str(p) for p in err.absolute_path) or "(root)"
        out.append(f"{where}: {err.message[:300]}")
    if len(errors) > limit:
        out.append(f"... {len(errors) - limit} more")
    return out


def check_schemas(docs: list[Doc], versions: list[str], results: Results) -> None:
    import kubernetes_validate.utils as kv

    for doc in docs:
        if doc.api_version.startswith("argoproj.io/"):
            validator = argo_validator(doc.kind)
            what = f"schema {doc.label()} (argo, hera {hera_version_string()})"
            if validator is None:
                results.fail(what, f"no Argo schema for kind {doc.kind}")
                continue
            results.check(what, schema_errors(validator, doc.body))
            continue
        for version in versions:
            what = f"schema {doc.label()} (kubernetes {version}, strict)"
            try:
                kv.validate(doc.body, version, strict=True)
            except kv.ValidationError as err:
                where = ".".join(str(p) for p in err.path) or "(root)"
                results.fail(what, f"{where}: {err.message[:300]}")
            except kv.SchemaNotFoundError as err:
                results.fail(what, err.message)
            except kv.VersionNotSupportedError as err:
                results.fail(what, err.message)
            except Exception as err:  # a broken document (no apiVersion, ...) is a failure too
                results.fail(what, f"{type(err).__name__}: {err}")
            else:
                results.ok(what)


def hera_version_string() -> str:
    try:
        from importlib.metadata import version

        return version("hera")
    except Exception:
        return "?"


# --------------------------------------------------------------------------
# silverline's exit-code contract


def dig(body, *path, default=None):
    for part in path:
        if isinstance(body, dict):
            body = body.get(part)
        elif isinstance(body, list) and isinstance(part, int) and part < len(body):
            body = body[part]
        else:
            return default
        if body is None:
            return default
    return body


def container_named(pod_spec: dict, name: str) -> dict | None:
    for container in pod_spec.get("containers") or []:
        if container.get("name") == name:
            return container
    return None


def hardened_container_problems(where: str, container: dict, pod_security: dict) -> list[str]:
    problems = []
    sc = container.get("securityContext") or {}
    if sc.get("readOnlyRootFilesystem") is not True:
        problems.append(f"{where}: securityContext.readOnlyRootFilesystem must be true")
    if sc.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{where}: securityContext.allowPrivilegeEscalation must be false")
    if "ALL" not in (dig(sc, "capabilities", "drop") or []):
        problems.append(f"{where}: securityContext.capabilities.drop must include ALL")
    if not (sc.get("runAsNonRoot") or pod_security.get("runAsNonRoot")):
        problems.append(f"{where}: runAsNonRoot must be true (pod or container)")
    mounts = {m.get("mountPath"): m for m in container.get("volumeMounts") or []}
    if "/tmp" not in mounts:
        problems.append(f"{where}: needs a writable volume at /tmp (the root filesystem is read-only)")
    if CONFIG_MOUNT not in mounts:
        problems.append(f"{where}: needs the config volume at {CONFIG_MOUNT}")
    limits = dig(container, "resources", "limits") or {}
    requests = dig(container, "resources", "requests") or {}
    for key in ("cpu", "memory"):
        if key not in requests:
            problems.append(f"{where}: resources.requests.{key} missing")
    if "memory" not in limits:
        problems.append(f"{where}: resources.limits.memory missing")
    return problems


def first_matching_action(policy: dict, container: str, code: int) -> str | None:
    """The podFailurePolicy action Kubernetes takes for a container exit code (first matching rule)."""
    for rule in policy.get("rules") or []:
        codes = rule.get("onExitCodes")
        if not codes:
            continue
        if codes.get("containerName") not in (None, container):
            continue
        values = codes.get("values") or []
        hit = code in values if codes.get("operator") == "In" else code not in values
        if hit:
            return rule.get("action")
    return None


def check_cronjob_contract(doc: Doc) -> list[str]:
    problems = []
    spec = doc.body.get("spec") or {}
    if spec.get("concurrencyPolicy") != "Forbid":
        problems.append("spec.concurrencyPolicy must be Forbid")
    job = dig(spec, "jobTemplate", "spec") or {}
    pod = dig(job, "template", "spec") or {}
    if pod.get("restartPolicy") != "Never":
        problems.append("podFailurePolicy requires template.spec.restartPolicy: Never")
    policy = job.get("podFailurePolicy")
    containers = pod.get("containers") or []
    if len(containers) != 1:
        problems.append("expected exactly one container (the silverline run)")
        return problems
    container = containers[0]
    name = container.get("name")
    if not policy:
        problems.append("spec.jobTemplate.spec.podFailurePolicy missing (retries are decided by exit code)")
    else:
        expected = {1: "FailJob", 2: "FailJob", 3: "Count", 4: "Ignore", 5: "Count", 101: "FailJob"}
        for code, action in expected.items():
            got = first_matching_action(policy, name, code)
            if got != action:
                problems.append(f"exit code {code} must map to {action}, maps to {got}")
        backoff = job.get("backoffLimit")
        if not isinstance(backoff, int) or backoff < 3:
            problems.append("backoffLimit must be >= 3, or exit codes 3 and 5 (Count) are hardly retried")
    problems += hardened_container_problems(f"container {name}", container, pod.get("securityContext") or {})
    if pod.get("serviceAccountName") is None:
        problems.append("template.spec.serviceAccountName missing (IRSA)")
    return problems


RETRY_TOKEN = re.compile(
    r"\s*(?:(?P<num>-?\d+)|(?P<str>'[^']*'|\"[^\"]*\")|(?P<op>==|!=|<=|>=|<|>|\|\||&&|!|\(|\))"
    r"|(?P<bool>true|false)|(?P<name>asInt\(lastRetry\.exitCode\)|lastRetry\.exitCode|lastRetry\.status))"
)


def eval_retry_expression(expression: str, exit_code: int, status: str) -> bool:
    """Evaluates an Argo retryStrategy expression (the subset of expr it may use here) for one outcome."""
    python = []
    pos = 0
    while pos < len(expression):
        m = RETRY_TOKEN.match(expression, pos)
        if not m or m.end() == pos:
            if expression[pos:].strip() == "":
                break
            raise ValueError(f"cannot evaluate {expression[pos:]!r}")
        pos = m.end()
        if m.group("num"):
            python.append(m.group("num"))
        elif m.group("bool"):
            python.append(" True " if m.group("bool") == "true" else " False ")
        elif m.group("str"):
            python.append(repr(m.group("str")[1:-1]))
        elif m.group("name"):
            python.append(
                repr(status) if m.group("name") == "lastRetry.status"
                else str(exit_code) if m.group("name").startswith("asInt") else repr(str(exit_code))
            )
        else:
            python.append({"||": " or ", "&&": " and ", "!": " not "}.get(m.group("op"), m.group("op")))
    return bool(eval("".join(python), {"__builtins__": {}}, {}))  # only literals and operators remain


def retry_policy_problems(retry: dict) -> list[str]:
    """What Argo does for each silverline outcome under this retryStrategy, against the contract."""
    if not retry:
        return ["retryStrategy missing"]
    problems = []
    if retry.get("retryPolicy", "OnFailure") not in ("Always", "OnFailure"):
        problems.append("retryStrategy.retryPolicy must be Always or OnFailure (exit 3 is a Failed node)")
    expression = str(retry.get("expression", ""))
    if not expression:
        return problems + ["retryStrategy.expression missing: every failure would be retried"]
    # (exit code, node phase) -> should Argo retry? -1: no exit code (pod evicted/deleted)
    expected = {(3, "Failed"): True, (5, "Failed"): True, (1, "Failed"): False, (2, "Failed"): False,
                (4, "Failed"): True, (101, "Failed"): False, (137, "Failed"): False}
    for (code, status), want in expected.items():
        try:
            got = eval_retry_expression(expression, code, status)
        except Exception as err:
            return problems + [f"retryStrategy.expression: {err}"]
        if got != want:
            problems.append(
                f"retryStrategy.expression {'retries' if got else 'does not retry'} exit code {code}"
                " (exit codes 3, 5 and 4, whose rerun exits 0, and only they, are retried)"
            )
    return problems


def check_argo_contract(doc: Doc) -> list[str]:
    problems = []
    spec = doc.body.get("spec") or {}
    templates = {t.get("name"): t for t in spec.get("templates") or []}
    params = {p.get("name") for p in dig(spec, "arguments", "parameters", default=[]) or []}
    for needed in ("cycle", "contributors"):
        if needed not in params:
            problems.append(f"spec.arguments.parameters must declare '{needed}'")
    fan_outs = [
        (t, step)
        for t in templates.values()
        for group in t.get("steps") or []
        for step in group or []
        if "withParam" in step
    ] + [(t, task) for t in templates.values() for task in dig(t, "dag", "tasks", default=[]) or [] if "withParam" in task]
    if not fan_outs:
        problems.append("no step fans out with withParam over the contributors")
    for parent, step in fan_outs:
        if "contributors" not in str(step.get("withParam")):
            problems.append(f"step {step.get('name')}: withParam should read workflow.parameters.contributors")
        if not (parent.get("parallelism") or spec.get("parallelism")):
            problems.append(f"template {parent.get('name')}: fan-out without a parallelism limit")
        if parent.get("failFast") is not False:
            problems.append(f"template {parent.get('name')}: failFast: false, or one bad drop stops the others")
        run = templates.get(step.get("template"))
        if run is None:
            continue
        retry = run.get("retryStrategy") or {}
        problems += [f"template {run.get('name')}: {p}" for p in retry_policy_problems(retry)]
        if not retry.get("limit"):
            problems.append(f"template {run.get('name')}: retryStrategy.limit missing")
        if not dig(retry, "backoff", "duration"):
            problems.append(f"template {run.get('name')}: retryStrategy.backoff.duration missing (exit 5 must wait)")
        container = run.get("container") or {}
        if container.get("command") != ["silverline"]:
            problems.append(f"template {run.get('name')}: container.command should be [silverline]")
        problems += hardened_container_problems(
            f"template {run.get('name')}", container, spec.get("securityContext") or {}
        )
    on_exit = spec.get("onExit")
    if not on_exit or on_exit not in templates:
        problems.append("spec.onExit must name an exit-handler template")
    else:
        text = json.dumps(templates[on_exit]) + json.dumps(
            [templates.get(s.get("template")) for g in templates[on_exit].get("steps") or [] for s in g]
        )
        if "workflow.status" not in text or "workflow.failures" not in text or "exit code" not in text:
            problems.append(
                "the exit handler must run on failure ({{workflow.status}}) and read exit codes from {{workflow.failures}}"
            )
    if not spec.get("serviceAccountName"):
        problems.append("spec.serviceAccountName missing (IRSA)")
    return problems


def guarded(check, doc: Doc) -> list[str]:
    """Runs a check; a manifest malformed enough to break the check is a failure, not a crash."""
    try:
        return check(doc)
    except Exception as err:
        return [f"malformed ({type(err).__name__}: {err})"]


def check_contracts(docs: list[Doc], results: Results) -> None:
    for doc in docs:
        if doc.kind == "CronJob":
            results.check(f"contract {doc.label()}", guarded(check_cronjob_contract, doc))
        elif doc.kind == "WorkflowTemplate":
            results.check(f"contract {doc.label()}", guarded(check_argo_contract, doc))


# --------------------------------------------------------------------------
# references between documents


def pod_specs(doc: Doc) -> list[tuple[str, dict, list[dict]]]:
    """(where, pod-level spec, containers) for every pod a document creates."""
    body = doc.body
    if doc.kind == "CronJob":
        pod = dig(body, "spec", "jobTemplate", "spec", "template", "spec") or {}
        return [("pod", pod, list(pod.get("containers") or []) + list(pod.get("initContainers") or []))]
    if doc.kind in ("Job", "Deployment"):
        pod = dig(body, "spec", "template", "spec") or {}
        return [("pod", pod, list(pod.get("containers") or []))]
    if doc.kind in ("WorkflowTemplate", "Workflow", "CronWorkflow", "ClusterWorkflowTemplate"):
        spec = body.get("spec") or {}
        if doc.kind == "CronWorkflow":
            spec = spec.get("workflowSpec") or {}
        out = []
        for t in spec.get("templates") or []:
            containers = [c for c in (t.get("container"), t.get("script")) if c]
            if containers:
                merged = {
                    "serviceAccountName": t.get("serviceAccountName") or spec.get("serviceAccountName"),
                    "volumes": list(spec.get("volumes") or []) + list(t.get("volumes") or []),
                }
                out.append((f"template {t.get('name')}", merged, containers))
        return out
    return []


def check_refs(docs: list[Doc], results: Results) -> None:
    by_kind: dict[str, dict[str, Doc]] = {}
    for doc in docs:
        by_kind.setdefault(doc.kind, {})[doc.name] = doc

    def keys_of(kind: str, name: str) -> set[str] | None:
        doc = by_kind.get(kind, {}).get(name)
        if doc is None:
            return None
        return set((doc.body.get("data") or {}).keys()) | set((doc.body.get("stringData") or {}).keys())

    for doc in docs:
        if pod_specs_safe(doc) or doc.kind in ("WorkflowTemplate", "RoleBinding"):
            results.check(f"refs {doc.label()}", guarded(lambda d: doc_refs(d, by_kind, keys_of), doc))


def pod_specs_safe(doc: Doc) -> list:
    try:
        return pod_specs(doc)
    except Exception:
        return [("?", {}, [])]


def doc_refs(doc: Doc, by_kind, keys_of) -> list[str]:
    problems: list[str] = []
    for where, pod, containers in pod_specs(doc):
        sa = pod.get("serviceAccountName")
        if sa and sa not in by_kind.get("ServiceAccount", {}):
            problems.append(f"{where}: ServiceAccount {sa} not defined")
        volumes = {v.get("name"): v for v in pod.get("volumes") or []}
        for volume in volumes.values():
            cm = volume.get("configMap")
            if cm:
                keys = keys_of("ConfigMap", cm.get("name"))
                if keys is None:
                    problems.append(f"{where}: ConfigMap {cm.get('name')} not defined")
                else:
                    for item in cm.get("items") or []:
                        if item.get("key") not in keys:
                            problems.append(f"{where}: ConfigMap {cm.get('name')} has no key {item.get('key')}")
            secret = volume.get("secret")
            if secret and keys_of("Secret", secret.get("secretName")) is None:
                problems.append(f"{where}: Secret {secret.get('secretName')} not defined")
        for container in containers:
            for mount in container.get("volumeMounts") or []:
                if mount.get("name") not in volumes:
                    problems.append(f"{where}: volumeMount {mount.get('name')} has no volume")
            for env in container.get("env") or []:
                for kind, ref in (
                    ("Secret", dig(env, "valueFrom", "secretKeyRef")),
                    ("ConfigMap", dig(env, "valueFrom", "configMapKeyRef")),
                ):
                    if not ref:
                        continue
                    keys = keys_of(kind, ref.get("name"))
                    if keys is None:
                        problems.append(f"{where}: env {env.get('name')}: {kind} {ref.get('name')} not defined")
                    elif ref.get("key") not in keys:
                        # an optional key may be absent from the template (e.g. the token alternative)
                        if not ref.get("optional"):
                            problems.append(f"{where}: env {env.get('name')}: {kind} {ref.get('name')} has no key {ref.get('key')}")
            for source in container.get("envFrom") or []:
                for kind, ref in (("ConfigMap", source.get("configMapRef")), ("Secret", source.get("secretRef"))):
                    if ref and keys_of(kind, ref.get("name")) is None and not ref.get("optional"):
                        problems.append(f"{where}: envFrom {kind} {ref.get('name')} not defined")
    if doc.kind in ("WorkflowTemplate", "Workflow", "ClusterWorkflowTemplate"):
        problems += argo_template_refs(doc.body.get("spec") or {})
    if doc.kind == "RoleBinding":
        role = dig(doc.body, "roleRef", "name")
        if dig(doc.body, "roleRef", "kind") == "Role" and role not in by_kind.get("Role", {}):
            problems.append(f"roleRef: Role {role} not defined")
        for subject in doc.body.get("subjects") or []:
            if subject.get("kind") == "ServiceAccount" and subject.get("name") not in by_kind.get("ServiceAccount", {}):
                problems.append(f"subject ServiceAccount {subject.get('name')} not defined")
    return problems


PARAM_REF = re.compile(r"\{\{\s*(inputs|workflow)\.parameters\.([A-Za-z0-9_-]+)\s*\}\}")


def argo_template_refs(spec: dict) -> list[str]:
    problems = []
    templates = {t.get("name"): t for t in spec.get("templates") or []}
    workflow_params = {p.get("name") for p in dig(spec, "arguments", "parameters", default=[]) or []}
    for field in ("entrypoint", "onExit"):
        if spec.get(field) and spec[field] not in templates:
            problems.append(f"spec.{field}: no template {spec[field]}")
    for name, template in templates.items():
        inputs = {p.get("name") for p in dig(template, "inputs", "parameters", default=[]) or []}
        steps = [s for g in template.get("steps") or [] for s in g or []]
        steps += dig(template, "dag", "tasks", default=[]) or []
        for step in steps:
            target = templates.get(step.get("template"))
            if target is None:
                problems.append(f"template {name}: step {step.get('name')} calls unknown template {step.get('template')}")
                continue
            wanted = {p.get("name") for p in dig(target, "inputs", "parameters", default=[]) or [] if "value" not in p and "default" not in p}
            given = {p.get("name") for p in dig(step, "arguments", "parameters", default=[]) or []}
            if wanted - given:
                problems.append(f"template {name}: step {step.get('name')} does not pass {sorted(wanted - given)}")
        own = copy.deepcopy(template)
        own.pop("steps", None)
        for scope, param in PARAM_REF.findall(json.dumps(own)):
            if scope == "inputs" and param not in inputs:
                problems.append(f"template {name}: inputs.parameters.{param} is not declared")
            if scope == "workflow" and param not in workflow_params:
                problems.append(f"template {name}: workflow.parameters.{param} is not declared")
        for scope, param in PARAM_REF.findall(json.dumps(template.get("steps") or [])):
            if scope == "workflow" and param not in workflow_params:
                problems.append(f"template {name}: workflow.parameters.{param} is not declared")
            if scope == "inputs" and param not in inputs:
                problems.append(f"template {name}: inputs.parameters.{param} is not declared")
    return problems


# --------------------------------------------------------------------------
# the dataset: its ConfigMap, the render, the per-dataset objects


def config_map_name(values: render.Values) -> str:
    return f"silverline-{values.dataset}-config"


def check_configmap(docs: list[Doc], values: render.Values, results: Results) -> None:
    docs = [d for d in docs if d.kind == "ConfigMap" and d.name == config_map_name(values)]
    if not docs:
        results.fail("configmap", f"no ConfigMap {config_map_name(values)} among the manifests")
        return
    what = f"configmap {docs[0].label()} matches the config files of {values.path.name}"
    data = docs[0].body.get("data") or {}
    problems = []
    items = values.config_items()
    for item in items:
        try:
            source = (values.config_dir / item["path"]).read_text()
        except OSError as err:
            problems.append(f"{values.config_dir / item['path']}: {err.strerror}")
            continue
        if item["key"] not in data:
            problems.append(f"key {item['key']} missing")
        elif data[item["key"]] != source:
            problems.append(f"key {item['key']} differs from {item['path']}")
    extra = set(data) - {i["key"] for i in items}
    if extra:
        problems.append(f"keys not rendered from the config files: {sorted(extra)}")
    if problems:
        problems.append("re-render: python3 deploy/render.py")
    results.check(what, problems)


IMAGE_DIGEST = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")


def check_images(docs: list[Doc], results: Results) -> None:
    """Every container image is pinned by digest: a tag can be moved under a running schedule."""
    problems = []
    count = 0
    for doc in docs:
        for where, _pod, containers in pod_specs_safe(doc):
            for container in containers:
                count += 1
                image = str(container.get("image", ""))
                if not IMAGE_DIGEST.match(image):
                    problems.append(f"{doc.label()} {where} container {container.get('name')}: image {image!r} is not pinned by digest (repository@sha256:<64 hex>)")
    results.check(f"images: all {count} pinned by digest", problems)


def check_network_policies(docs: list[Doc], results: Results) -> None:
    """Every pod a manifest makes is selected by a NetworkPolicy that limits its ingress and egress."""
    policies = [d for d in docs if d.kind == "NetworkPolicy"]
    problems = []
    for doc in docs:
        for where, pod, _containers in pod_specs_safe(doc):
            labels = pod_labels(doc, where)
            hits = [p for p in policies if selects(dig(p.body, "spec", "podSelector") or {}, labels)]
            if not hits:
                problems.append(f"{doc.label()} {where}: no NetworkPolicy selects its pods (labels {labels})")
            for p in hits:
                types = set(dig(p.body, "spec", "policyTypes") or [])
                if not {"Ingress", "Egress"} <= types:
                    problems.append(f"{p.label()}: policyTypes must be [Ingress, Egress]")
    results.check(f"networkpolicy: every pod selected ({len(policies)} policies)", problems)


def pod_labels(doc: Doc, where: str) -> dict:
    body = doc.body
    if doc.kind == "CronJob":
        return dict(dig(body, "spec", "jobTemplate", "spec", "template", "metadata", "labels") or {})
    if doc.kind == "Deployment":
        return dict(dig(body, "spec", "template", "metadata", "labels") or {})
    spec = body.get("spec") or {}
    if doc.kind == "CronWorkflow":
        spec = spec.get("workflowSpec") or {}
    labels = dict(dig(spec, "podMetadata", "labels") or {})
    name = where.removeprefix("template ")
    for t in spec.get("templates") or []:
        if t.get("name") == name:
            labels.update(dig(t, "metadata", "labels") or {})
    return labels


def selects(selector: dict, labels: dict) -> bool:
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        value, op, values = labels.get(expr.get("key")), expr.get("operator"), expr.get("values") or []
        if (op == "In" and value not in values) or (op == "NotIn" and value in values) \
                or (op == "Exists" and value is None) or (op == "DoesNotExist" and value is not None):
            return False
    return True


def check_render(values: render.Values, folder: Path, results: Results) -> None:
    what = f"dataset: {folder.relative_to(REPO) if folder.is_relative_to(REPO) else folder} is the render of {values.path.name}"
    try:
        problems = render.drift(render.render(values), folder)
    except render.ValuesError as err:
        problems = [str(err)]
    if problems:
        problems.append(f"re-render: python3 deploy/render.py --values {values.path}")
    results.check(what, problems)


def dataset_objects_problems(docs: list[Doc], values: render.Values) -> list[str]:
    """The objects a dataset's values must produce, and nothing of another dataset."""
    problems = []
    cronjobs = {d.name: d for d in docs if d.kind == "CronJob"}
    want = {c["name"]: c for c in values.contributors}
    if set(cronjobs) != set(want):
        problems.append(f"CronJobs {sorted(cronjobs)}, the values want {sorted(want)}")
    for name, c in want.items():
        doc = cronjobs.get(name)
        if doc is None:
            continue
        env = {e.get("name"): e.get("value") for e in dig(doc.body, "spec", "jobTemplate", "spec", "template", "spec", "containers", 0, "env") or []}
        if env.get("CONTRIBUTOR") != c["id"] or dig(doc.body, "spec", "schedule") != c["schedule"]:
            problems.append(f"CronJob {name}: CONTRIBUTOR {env.get('CONTRIBUTOR')} / schedule {dig(doc.body, 'spec', 'schedule')}, want {c['id']} / {c['schedule']}")
        if env.get("SILVERLINE_CONFIG") != f"{CONFIG_MOUNT}/{values.main}":
            problems.append(f"CronJob {name}: SILVERLINE_CONFIG is {env.get('SILVERLINE_CONFIG')}")
    crons = [d for d in docs if d.kind == "CronWorkflow"]
    templates = {d.name for d in docs if d.kind == "WorkflowTemplate"}
    if len(crons) != 1:
        problems.append(f"expected one CronWorkflow, found {len(crons)}")
    for cron in crons:
        ref = dig(cron.body, "spec", "workflowSpec", "workflowTemplateRef", "name")
        if ref not in templates:
            problems.append(f"{cron.label()}: workflowTemplateRef {ref} is not a WorkflowTemplate here")
        params = {p.get("name"): p.get("value") for p in dig(cron.body, "spec", "workflowSpec", "arguments", "parameters") or []}
        try:
            listed = json.loads(params.get("contributors") or "null")
        except ValueError:
            listed = None
        if listed != [c["id"] for c in values.contributors]:
            problems.append(f"{cron.label()}: contributors {params.get('contributors')!r}, the values list {[c['id'] for c in values.contributors]}")
    names = {d.name for d in docs}
    for needed in (config_map_name(values), f"silverline-{values.dataset}-env", f"silverline-{values.dataset}-jobs"):
        if needed not in names:
            problems.append(f"no object {needed}")
    workbench = [d for d in docs if d.kind in ("Deployment", "Service")]
    if values.workbench != bool(workbench):
        problems.append(f"workbench.enabled is {values.workbench} but {len(workbench)} workbench objects were rendered")
    foreign = [d.label() for d in docs if d.kind not in ("ServiceAccount", "Role", "RoleBinding", "Secret")
               and values.dataset not in d.name]
    if foreign:
        problems.append(f"objects not named after the dataset: {foreign}")
    return problems


def check_workbench(docs: list[Doc], results: Results) -> None:
    for doc in docs:
        if doc.kind != "Deployment":
            continue
        results.check(f"contract {doc.label()} (serve behind the proxy)", guarded(workbench_problems_for(docs), doc))


def workbench_problems_for(docs: list[Doc]):
    services = [d for d in docs if d.kind == "Service"]

    def problems_of(doc: Doc) -> list[str]:
        problems = []
        pod = dig(doc.body, "spec", "template", "spec") or {}
        labels = dig(doc.body, "spec", "template", "metadata", "labels") or {}
        silverline = container_named(pod, "silverline") or {}
        args = [str(a) for a in silverline.get("args") or []]
        if args[:1] != ["serve"] or "--listen" not in args:
            problems.append(f"container silverline must run `serve --listen ...`, runs {args}")
        if "--insecure-local" in args:
            problems.append("--insecure-local: anonymous access in a pod (reachable by everything that reaches the pod)")
        listen = args[args.index("--listen") + 1] if "--listen" in args and args.index("--listen") + 1 < len(args) else ""
        proxy = container_named(pod, "oauth2-proxy")
        if proxy is None:
            problems.append("no oauth2-proxy sidecar: the workbench needs an authenticating proxy in front")
        elif not listen.startswith("127.0.0.1:"):
            problems.append(f"silverline listens on {listen!r}: behind the sidecar it listens on 127.0.0.1 only")
        elif f"--upstream=http://{listen}/" not in (proxy.get("args") or []):
            problems.append(f"oauth2-proxy's --upstream is not http://{listen}/")
        if silverline.get("ports"):
            problems.append("container silverline exposes a port: only the proxy's may be reachable")
        proxy_ports = {p.get("name") for p in (proxy or {}).get("ports") or []}
        matching = [s for s in services if selects({"matchLabels": dig(s.body, "spec", "selector") or {}}, labels)]
        if not matching:
            problems.append("no Service selects the workbench pods")
        for service in matching:
            for port in dig(service.body, "spec", "ports") or []:
                if port.get("targetPort") not in proxy_ports:
                    problems.append(f"{service.label()}: targetPort {port.get('targetPort')} is not the proxy's port")
        problems += hardened_container_problems("container silverline", silverline, pod.get("securityContext") or {})
        return problems

    return problems_of


def find_silverline() -> Path | None:
    candidates = []
    if os.environ.get("SILVERLINE_BIN"):
        candidates.append(Path(os.environ["SILVERLINE_BIN"]))
    target = os.environ.get("CARGO_TARGET_DIR")
    for root in filter(None, [target, str(REPO / "target"), str(Path.home() / ".cache/silverline-target")]):
        candidates += [Path(root) / "release" / "silverline", Path(root) / "debug" / "silverline"]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def check_config_with_binary(docs: list[Doc], values: render.Values, results: Results) -> None:
    cm = next((d for d in docs if d.kind == "ConfigMap" and d.name == config_map_name(values)), None)
    if cm is None:
        return
    what = "check-config on the ConfigMap's files with the env ConfigMap's overrides"
    binary = find_silverline()
    if binary is None:
        results.skip(what, "no silverline binary (set SILVERLINE_BIN or build one)")
        return
    env_docs = [d for d in docs if d.kind == "ConfigMap" and d.name == f"silverline-{values.dataset}-env"]
    overrides = {k: str(v) for d in env_docs for k, v in (d.body.get("data") or {}).items()}
    with tempfile.TemporaryDirectory(prefix="silverline-deploy-") as tmp:
        for item in values.config_items():
            path = Path(tmp) / item["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text((cm.body.get("data") or {}).get(item["key"], ""))
        env = {k: v for k, v in os.environ.items() if not k.startswith("SILVERLINE")}
        env.update(overrides)
        env["SILVERLINE_LOG_FORMAT"] = "text"
        try:
            proc = subprocess.run(
                [str(binary), "check-config", "--config", str(Path(tmp) / values.main)],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            results.fail(what, f"{binary}: {err}")
            return
    output = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr).strip().replace("\n", " | ")
    if proc.returncode == 0:
        results.ok(f"{what} ({binary.name}: {output[:160]})")
    else:
        results.fail(what, f"{binary} exited {proc.returncode}: {output[:600]}")


# --------------------------------------------------------------------------
# the Dockerfile (hadolint, run by validate.sh, lints it; this checks what it builds)

DOCKERFILE = DEPLOY / "Dockerfile"
DOCKERIGNORE = DEPLOY / "Dockerfile.dockerignore"


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if line:
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def dockerfile_problems(text: str, ignore_text: str) -> list[str]:
    problems = []
    instructions = dockerfile_instructions(text)
    args = {}
    stages: list[list[tuple[str, str]]] = []
    for word, rest in instructions:
        if word == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip()
        if word == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((word, rest))
    if len(stages) < 2:
        return ["expected a multi-stage build (builder + runtime)"]

    def image(stage):
        ref = stage[0][1].split()[0]
        return re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), ref)

    builder, runtime = stages[0], stages[-1]
    if image(builder) != "rust:1.95-bookworm":
        problems.append(f"builder image is {image(builder)}, expected rust:1.95-bookworm")
    if not any(w == "RUN" and "cargo build --release --locked --bin silverline" in r for w, r in builder):
        problems.append("builder must run: cargo build --release --locked --bin silverline")
    runtime_words = [w for w, _ in runtime]
    if "RUN" in runtime_words:
        problems.append("the runtime stage must not RUN anything (no shell or build tools needed, base swappable)")
    users = [r for w, r in runtime if w == "USER"]
    if not users:
        problems.append("the runtime stage must set USER (non-root)")
    else:
        uid = users[-1].split(":")[0]
        if not uid.isdigit() or int(uid) == 0:
            problems.append(f"USER {users[-1]}: use a numeric non-zero uid (runAsNonRoot can verify it)")
    entry = [r for w, r in runtime if w == "ENTRYPOINT"]
    try:
        entrypoint = json.loads(entry[-1]) if entry else None
    except ValueError:
        entrypoint = None  # shell form
    if entrypoint != ["silverline"]:
        problems.append('ENTRYPOINT must be ["silverline"] (exec form)')
    env_text = " ".join(r for w, r in runtime if w == "ENV")
    if "SILVERLINE_LOG_FORMAT=json" not in env_text:
        problems.append("ENV SILVERLINE_LOG_FORMAT=json missing")
    copies = [r.split() for w, r in runtime if w == "COPY"]
    if not any(c[-1].rstrip("/") == CONFIG_MOUNT and "config/" in c for c in copies):
        problems.append(f"the runtime stage must COPY config/ to {CONFIG_MOUNT}")
    if not any(any(a.startswith("--from=") for a in c) and c[-1].endswith("/silverline") for c in copies):
        problems.append("the runtime stage must COPY the binary from the builder")
    # cargo reads every target Cargo.toml declares, even for `--bin silverline`: all must be copied
    copied = {p.rstrip("/").split("/")[0] for w, r in builder if w == "COPY" for p in r.split()[:-1] if not p.startswith("--")}
    try:
        import tomllib

        manifest = tomllib.loads((REPO / "Cargo.toml").read_text())
    except (OSError, ValueError) as err:
        problems.append(f"Cargo.toml: {err}")
        manifest = {}
    declared = [manifest.get("package", {}).get("build") or ("build.rs" if (REPO / "build.rs").exists() else None)]
    declared += [(manifest.get("lib") or {}).get("path")]
    for section in ("bin", "test", "bench", "example"):
        declared += [t.get("path") for t in manifest.get(section, []) if isinstance(t, dict)]
    for path in filter(None, declared):
        if isinstance(path, str) and path.split("/")[0] not in copied:
            problems.append(f"Cargo.toml names {path}, which the builder stage does not COPY")
    if manifest.get("workspace"):
        problems.append("Cargo.toml is a workspace: the builder must COPY every member")
    # every file taken from the context must exist and get through the ignore file's allow-list
    allowed = [line[1:].rstrip("/") for line in ignore_text.splitlines() if line.startswith("!")]
    if "*" not in [line.strip() for line in ignore_text.splitlines()]:
        problems.append("Dockerfile.dockerignore should ignore everything (*) and allow-list what the build copies")
    for stage in stages:
        for word, rest in stage:
            if word not in ("COPY", "ADD"):
                continue
            parts = [p for p in rest.split() if not p.startswith("--")]
            if any(p.startswith("--from=") for p in rest.split()):
                continue
            for source in parts[:-1]:
                top = source.rstrip("/").split("/")[0]
                if not (REPO / source).exists():
                    problems.append(f"COPY {source}: not in the repository")
                if top not in allowed:
                    problems.append(f"COPY {source}: excluded by Dockerfile.dockerignore")
    return problems


def check_dockerfile(results: Results, text: str | None = None, ignore_text: str | None = None) -> None:
    try:
        text = DOCKERFILE.read_text() if text is None else text
        ignore_text = DOCKERIGNORE.read_text() if ignore_text is None else ignore_text
    except OSError as err:
        results.fail("dockerfile", str(err))
        return
    try:
        problems = dockerfile_problems(text, ignore_text)
    except Exception as err:
        problems = [f"malformed ({type(err).__name__}: {err})"]
    results.check("dockerfile deploy/Dockerfile (stages, non-root, entrypoint, context)", problems)


# --------------------------------------------------------------------------
# negative controls: each mutation of the real manifests must be caught


def _cronjob(docs):
    return next(d.body for d in docs if d.kind == "CronJob")


def _cron_pod(docs):
    return _cronjob(docs)["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def _workflow(docs):
    return next(d.body for d in docs if d.kind == "WorkflowTemplate")


def _run_template(docs):
    return next(t for t in _workflow(docs)["spec"]["templates"] if t.get("retryStrategy"))


def _workbench_args(docs):
    pod = next(d.body for d in docs if d.kind == "Deployment")["spec"]["template"]["spec"]
    return container_named(pod, "silverline")["args"]


def _set_exit_action(docs, code, action):
    for rule in _cronjob(docs)["spec"]["jobTemplate"]["spec"]["podFailurePolicy"]["rules"]:
        codes = rule.get("onExitCodes") or {}
        if codes.get("operator") == "In" and code in codes.get("values", []):
            rule["action"] = action


MUTATIONS = {
    "CronJob: unknown field in the pod spec (restartPolicyy)": lambda docs: _cron_pod(docs).update(
        restartPolicyy=_cron_pod(docs).pop("restartPolicy")
    ),
    "CronJob: backoffLimit is not an integer": lambda docs: _cronjob(docs)["spec"]["jobTemplate"]["spec"].update(
        backoffLimit="three"
    ),
    "CronJob: exit code 1 retried (Count)": lambda docs: _set_exit_action(docs, 1, "Count"),
    "CronJob: restartPolicy OnFailure": lambda docs: _cron_pod(docs).update(restartPolicy="OnFailure"),
    "CronJob: writable root filesystem": lambda docs: _cron_pod(docs)["containers"][0]["securityContext"].update(
        readOnlyRootFilesystem=False
    ),
    "CronJob: Secret that no manifest defines": lambda docs: next(
        e for e in _cron_pod(docs)["containers"][0]["env"] if "valueFrom" in e
    )["valueFrom"]["secretKeyRef"].update(name="no-such-secret"),
    "WorkflowTemplate: unknown field in retryStrategy": lambda docs: _run_template(docs)["retryStrategy"].update(
        limitt=3
    ),
    "WorkflowTemplate: retries exit code 1": lambda docs: _run_template(docs)["retryStrategy"].update(
        expression="asInt(lastRetry.exitCode) == 1"
    ),
    "WorkflowTemplate: retries everything (expression always true)": lambda docs: _run_template(docs)[
        "retryStrategy"
    ].update(expression="asInt(lastRetry.exitCode) == 3 || true"),
    "WorkflowTemplate: parallelism is not an integer": lambda docs: next(
        t for t in _workflow(docs)["spec"]["templates"] if "parallelism" in t
    ).update(parallelism="eight"),
    "WorkflowTemplate: step calls a template that does not exist": lambda docs: next(
        t for t in _workflow(docs)["spec"]["templates"] if t.get("steps")
    )["steps"][0][0].update(template="no-such-template"),
    "WorkflowTemplate: undeclared input parameter": lambda docs: _run_template(docs)["container"]["args"].append(
        "{{inputs.parameters.no-such-param}}"
    ),
    "WorkflowTemplate: no exit handler": lambda docs: _workflow(docs)["spec"].pop("onExit"),
    "ConfigMap: rules differ from config/": lambda docs: next(
        d.body for d in docs if d.kind == "ConfigMap" and d.name.endswith("-config")
    )["data"].update({"credit_rules.csv": "rule_id\n"}),
    "CronJob: exit code 5 not retried (FailJob)": lambda docs: _set_exit_action(docs, 5, "FailJob"),
    "CronJob: image by tag only": lambda docs: _cron_pod(docs)["containers"][0].update(image="silverline:0.1.0"),
    "WorkflowTemplate: exit code 5 not retried": lambda docs: _run_template(docs)["retryStrategy"].update(
        expression="asInt(lastRetry.exitCode) == 3 || lastRetry.status == 'Error'"
    ),
    "WorkflowTemplate: helper image by tag only": lambda docs: next(
        t for t in _workflow(docs)["spec"]["templates"] if t.get("script")
    )["script"].update(image="python:3.12-alpine"),
    "CronWorkflow: starts a template that does not exist": lambda docs: next(
        d.body for d in docs if d.kind == "CronWorkflow"
    )["spec"]["workflowSpec"]["workflowTemplateRef"].update(name="no-such-template"),
    "CronWorkflow: a contributor missing from its list": lambda docs: next(
        d.body for d in docs if d.kind == "CronWorkflow"
    )["spec"]["workflowSpec"]["arguments"]["parameters"][1].update(value='["BANK_A"]'),
    "Deployment: workbench started with --insecure-local": lambda docs: _workbench_args(docs).append("--insecure-local"),
    "Deployment: workbench listening on every address": lambda docs: _workbench_args(docs).__setitem__(
        _workbench_args(docs).index("--listen") + 1, "0.0.0.0:8080"
    ),
    "NetworkPolicy: none for the jobs": lambda docs: docs.remove(
        next(d for d in docs if d.kind == "NetworkPolicy" and d.name.endswith("-jobs"))
    ),
    "a kind with no schema": lambda docs: _workflow(docs).update(kind="WorkflowTemplat"),
}


def selftest(docs: list[Doc], values: render.Values, versions: list[str], results: Results) -> None:
    baseline = Results(quiet=True)
    run_checks(docs, values, versions[-1:], baseline, binary=False)
    if baseline.failed:
        results.fail("negative controls", "the unmodified manifests must pass first")
        return
    for name, mutate in MUTATIONS.items():
        mutated = [Doc(d.path, d.index, copy.deepcopy(d.body)) for d in docs]
        what = f"negative control: {name} is rejected"
        try:
            mutate(mutated)
        except (StopIteration, KeyError, IndexError, TypeError) as err:
            results.fail(what, f"could not apply the mutation ({type(err).__name__}: {err}): update MUTATIONS")
            continue
        probe = Results(quiet=True)
        run_checks(mutated, values, versions[-1:], probe, binary=False)
        if probe.failed:
            results.ok(f"{what} ({probe.failures[0][:140]})")
        else:
            results.fail(what, "the validator accepted it")
    dockerfile = DOCKERFILE.read_text()
    for name, broken in {
        "Dockerfile: runs as root": re.sub(r"(?m)^USER .*$", "USER root", dockerfile),
        "Dockerfile: RUN in the runtime stage": dockerfile.rstrip() + "\nRUN apt-get update\n",
        "Dockerfile: shell-form entrypoint": re.sub(r"(?m)^ENTRYPOINT .*$", "ENTRYPOINT silverline", dockerfile),
    }.items():
        probe = Results(quiet=True)
        check_dockerfile(probe, broken)
        what = f"negative control: {name} is rejected"
        if probe.failed:
            results.ok(f"{what} ({probe.failures[0][:140]})")
        else:
            results.fail(what, "the validator accepted it")


# --------------------------------------------------------------------------


def cronjob_wrapper_problems(doc: Doc) -> list[str]:
    """Runs the CronJob's shell wrapper with a stub silverline: the drop id, DROP override, exit codes."""
    import datetime

    container = dig(doc.body, "spec", "jobTemplate", "spec", "template", "spec", "containers", 0) or {}
    command = container.get("command") or []
    if command[:2] != ["/bin/sh", "-c"]:
        return []  # runs silverline directly: nothing to check here
    script = (container.get("args") or [""])[0]
    env_values = {e.get("name"): e.get("value", "") for e in container.get("env") or [] if "value" in e}
    today = datetime.datetime.now(datetime.timezone.utc).date().replace(day=1)
    previous = (today - datetime.timedelta(days=1)).strftime("%Y-%m")
    problems = []
    with tempfile.TemporaryDirectory(prefix="silverline-wrapper-") as tmp:
        stub = Path(tmp) / "silverline"
        stub.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$STUB_OUT"\nexit "$STUB_EXIT"\n')
        stub.chmod(0o755)
        cases = [("", 0, previous), ("", 1, previous), ("", 3, previous), ("2026-07", 0, "2026-07")]
        for drop, code, want in cases:
            env = {**os.environ, **env_values}
            env.update(PATH=f"{tmp}:{os.environ.get('PATH', '')}", STUB_OUT=str(Path(tmp) / "args"),
                       STUB_EXIT=str(code), DROP=drop)
            proc = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, timeout=30)
            args = (Path(tmp) / "args").read_text().split("\n")[:-1] if (Path(tmp) / "args").exists() else []
            if proc.returncode != code:
                problems.append(f"silverline exiting {code} made the container exit {proc.returncode}: {proc.stderr.strip()[:200]}")
            if "--drop" not in args or args[args.index("--drop") + 1] != want:
                problems.append(f"DROP={drop!r}: expected --drop {want}, silverline got {args}")
            if args[:1] != ["run"] or "--contributor" not in args or "--config" not in args:
                problems.append(f"unexpected silverline arguments {args}")
    return problems


SECOND_DATASET = DEPLOY / "testdata" / "second_dataset.yaml"


def check_second_dataset(versions: list[str], results: Results) -> None:
    """Another dataset's values render to its own objects, which pass every check."""
    values = render.load_values(SECOND_DATASET)
    with tempfile.TemporaryDirectory(prefix="silverline-render-") as tmp:
        folder = Path(tmp)
        for name, text in render.render(values).items():
            (folder / name).write_text(text)
        probe = Results(quiet=True)
        docs = load_docs(sorted(folder.glob("*.yaml")), probe)
        run_checks(docs, values, versions[-1:], probe, binary=False)
        settings = json.loads((folder / render.AIRFLOW_FILE).read_text())
    what = f"dataset: {SECOND_DATASET.relative_to(REPO)} renders {len(values.contributors)} CronJobs and passes every check"
    problems = probe.failures[:5]
    if settings.get("contributors") != [c["id"] for c in values.contributors]:
        problems.append(f"{render.AIRFLOW_FILE}: contributors {settings.get('contributors')}")
    results.check(what, problems)


def check_refused_values(values: render.Values, results: Results) -> None:
    """Values that must not render: each is refused with the setting named."""
    cases = {
        "an image by tag": (("image", "digest"), "latest", "image.digest"),
        "a contributor listed twice": (("contributors",), [{"id": "BANK_A"}, {"id": "BANK_A"}], "listed twice"),
        "the workbench with --insecure-local": (("workbench", "args"), ["serve", "--listen", "127.0.0.1:8080", "--insecure-local"], "--insecure-local"),
        "two config files with one name": (("config", "files"), ["rules/a.csv", "other/a.csv"], "two files are named"),
    }
    for name, (path, bad, expected) in cases.items():
        raw = copy.deepcopy(values.raw)
        node = raw
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = bad
        what = f"negative control: values with {name} are refused"
        try:
            render.render(render.Values(values.path, raw))
        except render.ValuesError as err:
            if expected in str(err):
                results.ok(f"{what} ({str(err)[-120:]})")
            else:
                results.fail(what, f"refused for another reason: {err}")
        else:
            results.fail(what, "render.py rendered them")


def run_checks(docs: list[Doc], values: render.Values, versions: list[str], results: Results,
               binary: bool = True) -> None:
    check_schemas(docs, versions, results)
    check_contracts(docs, results)
    check_workbench(docs, results)
    check_images(docs, results)
    check_network_policies(docs, results)
    results.check(f"dataset: {values.path.name} produces its objects", dataset_objects_problems(docs, values))
    for doc in docs:
        if doc.kind == "CronJob" and binary:
            results.check(f"wrapper {doc.label()} (drop id = previous month, exit code kept)", guarded(cronjob_wrapper_problems, doc))
    check_refs(docs, results)
    check_configmap(docs, values, results)
    if binary:
        check_config_with_binary(docs, values, results)


COMMANDS = ("check", "render-configmap", "selftest")


def main(argv: list[str]) -> int:
    command = "check"
    if argv and argv[0] in COMMANDS:
        command, argv = argv[0], argv[1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="manifest files (default: deploy/k8s/*.yaml)")
    parser.add_argument(
        "--k8s-versions",
        default=os.environ.get("SILVERLINE_K8S_VERSIONS", DEFAULT_K8S_VERSIONS),
        help=f"comma-separated Kubernetes versions to validate against (default {DEFAULT_K8S_VERSIONS})",
    )
    parser.add_argument("--values", type=Path, default=render.DEFAULT_VALUES,
                        help="the dataset values the manifests were rendered from (default: the shipped ones)")
    parser.add_argument("--counts", type=Path, help="also write 'passed failed skipped' to this file")
    parser.add_argument(
        "--no-exec",
        "--no-binary",
        dest="no_exec",
        action="store_true",
        help="skip the checks that run programs (silverline check-config, the CronJob's shell wrapper)",
    )
    args = parser.parse_args(argv)

    try:
        values = render.load_values(args.values)
    except render.ValuesError as err:
        print(f"FAIL values: {err}")
        return 1
    if command == "render-configmap":
        sys.stdout.write(render.render(values)["configmap.yaml"])
        return 0

    paths = [p.resolve() for p in args.paths] or sorted(K8S_DIR.glob("*.yaml"))
    versions = [v.strip() for v in args.k8s_versions.split(",") if v.strip()]
    results = Results()
    docs = load_docs(paths, results)
    if command == "selftest":
        selftest(docs, values, versions, results)
        check_second_dataset(versions, results)
        check_refused_values(values, results)
    else:
        run_checks(docs, values, versions, results, binary=not args.no_exec)
        if not args.paths:
            check_render(values, K8S_DIR, results)
            check_dockerfile(results)
    if args.counts:
        args.counts.write_text(f"{results.passed} {results.failed} {results.skipped}\n")
    if results.skipped:
        print(f"({results.skipped} skipped)")
    print(f"manifests: {results.passed} passed, {results.failed} failed")
    return 1 if results.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
