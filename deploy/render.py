#!/usr/bin/env python3
"""Renders one dataset's Kubernetes manifests from deploy/base/ and its values.

    python3 deploy/render.py [--values deploy/datasets/credit_statements.yaml]
                             [--out deploy/k8s] [--image-digest sha256:<hex>]
                             [--helper-digest sha256:<hex>] [--proxy-digest sha256:<hex>]
    python3 deploy/render.py --check      # exit 1 if deploy/k8s differs from a fresh render

Kustomize-style, in plain Python (neither Helm nor Kustomize can be installed
from a package registry on the machines this project builds on): the files
under deploy/base/ are ordinary manifests; this script copies them, replaces
their placeholder tokens (DATASET, IMAGE@sha256:DIGEST, ...) and sets the
dataset-specific fields from a values file: the config files become a
ConfigMap and the config volume's items, every contributor gets a CronJob,
the contributor list feeds the Argo CronWorkflow, and so on. The values file
is documented in deploy/datasets/credit_statements.yaml.

Output: one file per base file (plus configmap.yaml, configmap-env.yaml and
airflow-dataset.json, the Airflow DAG's settings), each marked GENERATED.
deploy/validate.sh validates the rendered files and fails when deploy/k8s
is not what this script renders from the shipped values.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parent
REPO = DEPLOY.parent
BASE_DIR = DEPLOY / "base"
DEFAULT_VALUES = DEPLOY / "datasets" / "credit_statements.yaml"
DEFAULT_OUT = DEPLOY / "k8s"
CONFIG_MOUNT = "/etc/silverline"
AIRFLOW_FILE = "airflow-dataset.json"
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
CONFIG_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")
# CronJob names longer than this cannot create their Jobs (the controller
# appends 11 characters, and a Job name is a 63-character label value).
CRONJOB_NAME_MAX = 52
BASE_FILES = (
    "serviceaccount.yaml",
    "argo-rbac.yaml",
    "secret.yaml",
    "networkpolicy.yaml",
    "cronjob.yaml",
    "argo-workflow.yaml",
    "workbench.yaml",
)


class ValuesError(Exception):
    """A values file that cannot be rendered: names the file and the setting."""


# --------------------------------------------------------------------------
# values


class Values:
    """A dataset's values file, checked: every accessor names the setting it read."""

    def __init__(self, path: Path, raw: dict, image_digest: str | None = None,
                 helper_digest: str | None = None, proxy_digest: str | None = None) -> None:
        self.path = path
        self.raw = raw
        self.dataset = self.text("dataset")
        if not NAME_RE.match(self.dataset) or len(self.dataset) > 30:
            self.error("dataset", "lowercase letters, digits and dashes, at most 30 characters")
        self.config_dir = (REPO / self.text("config", "dir")).resolve()
        self.main = self.text("config", "main")
        self.files = [str(f) for f in self.get("config", "files", default=[])]
        self.image = self.image_ref("image", image_digest)
        self.helper_image = self.image_ref("helperImage", helper_digest)
        self.contributors = self.contributor_list()
        self.workbench = bool(self.get("workbench", "enabled", default=False))
        self.proxy_image = self.image_ref(("workbench", "proxy"), proxy_digest) if self.workbench else ""

    def error(self, setting: str, why: str):
        raise ValuesError(f"{self.path}: {setting}: {why}")

    def get(self, *path, default=None):
        node = self.raw
        for part in path:
            if not isinstance(node, dict) or part not in node:
                if default is not None:
                    return default
                self.error(".".join(path), "missing")
            node = node[part]
        return node

    def text(self, *path) -> str:
        value = self.get(*path)
        if not isinstance(value, str) or not value:
            self.error(".".join(path), "must be a non-empty string")
        return value

    def image_ref(self, section, digest: str | None) -> str:
        path = section if isinstance(section, tuple) else (section,)
        name = ".".join(path)
        repository = self.text(*path, "repository") if self.get(*path, default={}) else None
        if repository is None:
            self.error(f"{name}.repository", "missing")
        digest = digest or self.text(*path, "digest")
        if not DIGEST_RE.match(digest):
            self.error(f"{name}.digest", f"must be sha256:<64 hex digits> (images are pinned by digest), got {digest!r}")
        if "@" in repository or re.search(r":[^/]*$", repository):
            self.error(f"{name}.repository", "a repository without tag or digest (the digest is its own setting)")
        return f"{repository}@{digest}"

    def contributor_list(self) -> list[dict]:
        entries = self.get("contributors")
        if not isinstance(entries, list) or not entries:
            self.error("contributors", "a non-empty list of {id: ..., schedule: ...}")
        seen = set()
        out = []
        for i, entry in enumerate(entries):
            where = f"contributors[{i}]"
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                self.error(where, "needs an id")
            cid = entry["id"]
            if not LABEL_VALUE_RE.match(cid) or len(cid) > 63:
                self.error(f"{where}.id", f"{cid!r} is not a valid label value (letters, digits, - _ .)")
            if cid in seen:
                self.error(f"{where}.id", f"{cid!r} is listed twice")
            seen.add(cid)
            name = f"silverline-{self.dataset}-{slug(cid)}"
            if len(name) > CRONJOB_NAME_MAX:
                self.error(f"{where}.id", f"the CronJob name {name} is longer than {CRONJOB_NAME_MAX} characters")
            out.append({"id": cid, "name": name, "schedule": entry.get("schedule") or self.text("schedule")})
        return out

    def config_items(self) -> list[dict]:
        """The ConfigMap key and mounted path of every config file (the main file first)."""
        items = []
        for rel in [self.main, *self.files]:
            key = Path(rel).name
            if not CONFIG_KEY_RE.match(key):
                self.error("config.files", f"{rel}: {key} is not a valid ConfigMap key")
            if any(i["key"] == key for i in items):
                self.error("config.files", f"two files are named {key}: ConfigMap keys must differ")
            if Path(rel).is_absolute() or ".." in Path(rel).parts:
                self.error("config.files", f"{rel}: must be a path inside config.dir")
            items.append({"key": key, "path": rel})
        return items


def slug(text: str) -> str:
    """A DNS-1123 name part for an id (BANK_A -> bank-a)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def load_values(path: Path, **digests) -> Values:
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ValuesError(f"{path}: {err}") from err
    if not isinstance(raw, dict):
        raise ValuesError(f"{path}: a values file is a mapping")
    return Values(path, raw, **digests)


# --------------------------------------------------------------------------
# YAML out


def block_scalar(text: str, indent: int) -> str:
    """A YAML literal block for text (exact round trip), or a JSON-quoted scalar when a block cannot be."""
    pad = " " * indent
    trailing = len(text) - len(text.rstrip("\n"))
    chomp = "-" if trailing == 0 else ("" if trailing == 1 else "+")
    body = text.rstrip("\n").split("\n") if text.strip("\n") else []
    printable = all(ch == "\n" or ch == "\t" or (" " <= ch and ch != "\x7f") for ch in text)
    if body and printable and not body[0].startswith(" ") and "\r" not in text:
        rendered = "|" + chomp + "\n" + "\n".join((pad + line) if line else "" for line in body)
        rendered += "\n" * max(trailing - 1, 0)
        return rendered
    return json.dumps(text)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (scripts) as literal blocks, like the hand-written bases."""


def _str(dumper, value):
    style = "|" if "\n" in value and not value.startswith(" ") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(docs: list[dict]) -> str:
    return "---\n".join(
        yaml.dump(d, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096) for d in docs
    )


def leading_comment(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines)


def generated_header(source: str, values: Values) -> str:
    try:
        shown = values.path.resolve().relative_to(REPO)
    except ValueError:
        shown = values.path
    return (
        f"# GENERATED by `python3 deploy/render.py` from {source} and {shown}: do not edit.\n"
        "# deploy/validate.sh fails when this file and a fresh render differ.\n#\n"
    )


# --------------------------------------------------------------------------
# the dataset's objects


def substitute(node, tokens: dict[str, str]):
    """Replaces the base's placeholder tokens in every string of a document."""
    if isinstance(node, dict):
        return {k: substitute(v, tokens) for k, v in node.items()}
    if isinstance(node, list):
        return [substitute(v, tokens) for v in node]
    if isinstance(node, str):
        for token, value in tokens.items():
            node = node.replace(token, value)
    return node


def tokens_for(values: Values) -> dict[str, str]:
    tokens = {
        "IMAGE@sha256:DIGEST": values.image,
        "HELPER@sha256:DIGEST": values.helper_image,
        f"{CONFIG_MOUNT}/MAIN": f"{CONFIG_MOUNT}/{values.main}",
        "CONTRIBUTORS": json.dumps([c["id"] for c in values.contributors]),
        "DATASET": values.dataset,
    }
    if values.workbench:
        tokens["PROXY@sha256:DIGEST"] = values.proxy_image
        tokens["PROXY_SECRET"] = values.text("workbench", "proxy", "secret")
        tokens["ISSUER"] = values.text("workbench", "proxy", "oidcIssuerUrl")
    return tokens


def set_config_items(volumes: list[dict], values: Values) -> None:
    for volume in volumes or []:
        if (volume.get("configMap") or {}).get("name") == f"silverline-{values.dataset}-config":
            volume["configMap"]["items"] = values.config_items()


def cronjobs(base: list[dict], values: Values) -> list[dict]:
    out = []
    for contributor in values.contributors:
        doc = copy.deepcopy(base[0])
        doc["metadata"]["name"] = contributor["name"]
        for labels in (
            doc["metadata"]["labels"],
            doc["spec"]["jobTemplate"]["metadata"]["labels"],
            doc["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"],
        ):
            labels["silverline.io/contributor"] = contributor["id"]
        doc["spec"]["schedule"] = contributor["schedule"]
        doc["spec"]["timeZone"] = values.text("timeZone")
        job = doc["spec"]["jobTemplate"]["spec"]
        job["backoffLimit"] = int(values.get("dropWait", "cronjob", "backoffLimit"))
        pod = job["template"]["spec"]
        for env in pod["containers"][0]["env"]:
            if env["name"] == "CONTRIBUTOR":
                env["value"] = contributor["id"]
        set_config_items(pod["volumes"], values)
        out.append(doc)
    return out


def argo(base: list[dict], values: Values) -> list[dict]:
    template, cron = copy.deepcopy(base[0]), copy.deepcopy(base[1])
    spec = template["spec"]
    set_config_items(spec.get("volumes"), values)
    wait = values.get("dropWait", "argo")
    for t in spec["templates"]:
        if "parallelism" in t:
            t["parallelism"] = int(values.get("parallelism"))
        if "retryStrategy" in t:
            t["retryStrategy"]["limit"] = int(wait["limit"])
            t["retryStrategy"]["backoff"] = {
                "duration": str(wait["duration"]), "factor": int(wait["factor"]), "cap": str(wait["cap"])
            }
    cron["spec"]["schedules"] = [values.text("schedule")]
    cron["spec"]["timezone"] = values.text("timeZone")
    return [template, cron]


def network_policies(base: list[dict], values: Values) -> list[dict]:
    egress = []
    cidrs = values.get("egress", "cidrs")
    ports = [{"protocol": "TCP", "port": int(p)} for p in values.get("egress", "ports")]
    if cidrs:
        egress.append({"to": [{"ipBlock": {"cidr": c}} for c in cidrs], "ports": ports})
    for ns in values.get("egress", "namespaces", default=[]):
        egress.append({
            "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns["name"]}}}],
            "ports": [{"protocol": "TCP", "port": int(p)} for p in ns["ports"]],
        })
    docs = []
    for doc in copy.deepcopy(base):
        if doc["metadata"]["name"].endswith("-workbench"):
            if not values.workbench:
                continue
            doc["spec"]["ingress"] = [{
                "from": [
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}
                    for ns in values.get("workbench", "ingressNamespaces")
                ],
                "ports": [{"protocol": "TCP", "port": int(values.get("workbench", "proxy", "port"))}],
            }]
        doc["spec"]["egress"] += egress
        docs.append(doc)
    return docs


def workbench(base: list[dict], values: Values) -> list[dict]:
    if not values.workbench:
        return []
    deployment, service = copy.deepcopy(base)
    args = [str(a) for a in values.get("workbench", "args")]
    if not args or args[0] != "serve":
        values.error("workbench.args", "must start with serve")
    if "--insecure-local" in args:
        values.error("workbench.args", "--insecure-local is for a laptop's loopback, never a pod")
    deployment["spec"]["replicas"] = int(values.get("workbench", "replicas"))
    pod = deployment["spec"]["template"]["spec"]
    silverline, proxy = pod["containers"]
    silverline["args"] = args
    port = int(values.get("workbench", "port"))
    proxy_port = int(values.get("workbench", "proxy", "port"))
    proxy["args"] = [
        f"--http-address=0.0.0.0:{proxy_port}" if a.startswith("--http-address=")
        else f"--upstream=http://127.0.0.1:{port}/" if a.startswith("--upstream=") else a
        for a in proxy["args"]
    ]
    proxy["ports"][0]["containerPort"] = proxy_port
    set_config_items(pod["volumes"], values)
    return [deployment, service]


def secrets(base: list[dict], values: Values) -> list[dict]:
    """The Secrets; the workbench's (its proxy's, its access file) only with the workbench."""
    def workbench_only(name: str) -> bool:
        return name == "PROXY_SECRET" or name.endswith("-workbench-access")
    return [d for d in base if values.workbench or not workbench_only(d["metadata"]["name"])]


PER_FILE = {"cronjob.yaml": cronjobs, "argo-workflow.yaml": argo, "networkpolicy.yaml": network_policies,
            "workbench.yaml": workbench, "secret.yaml": secrets}


def render_configmap(values: Values) -> str:
    """The ConfigMap of the dataset's config files, each as a literal block (exact round trip)."""
    lines = [
        "# The dataset contract and rules, mounted at /etc/silverline (the volume's",
        "# items put each key back at its path under config.dir). Environment-specific",
        "# settings (buckets, catalog URI) are overrides in configmap-env.yaml.",
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata:",
        f"  name: silverline-{values.dataset}-config",
        "  labels:",
        "    app.kubernetes.io/name: silverline",
        "    app.kubernetes.io/part-of: silverline",
        "data:",
    ]
    sources = {}
    for item in values.config_items():
        path = values.config_dir / item["path"]
        try:
            sources[item["key"]] = path.read_text()
        except OSError as err:
            values.error("config", f"{path}: {err.strerror}")
        lines.append(f"  {item['key']}: {block_scalar(sources[item['key']], 4)}")
    rendered = "\n".join(lines) + "\n"
    if (yaml.safe_load(rendered) or {}).get("data") != sources:
        values.error("config", "a config file does not round-trip through YAML")
    return rendered


def render_env(values: Values) -> str:
    env = values.get("env")
    if not isinstance(env, dict):
        values.error("env", "a mapping of variable -> value")
    doc = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"silverline-{values.dataset}-env",
                     "labels": {"app.kubernetes.io/name": "silverline", "app.kubernetes.io/part-of": "silverline"}},
        "data": {str(k): str(v) for k, v in env.items()},
    }
    return "# Per-environment settings as silverline's env overrides (values: env); every pod loads them.\n" + dump([doc])


def airflow_settings(values: Values) -> str:
    """What deploy/airflow/silverline_dag.py reads (SILVERLINE_DATASET_FILE): one dataset's names and waits."""
    settings = {
        "dataset": values.dataset,
        "image": values.image,
        "config_file": f"{CONFIG_MOUNT}/{values.main}",
        "config_map": f"silverline-{values.dataset}-config",
        "env_config_map": f"silverline-{values.dataset}-env",
        "config_items": values.config_items(),
        "contributors": [c["id"] for c in values.contributors],
        "schedule": values.text("schedule"),
        "parallelism": int(values.get("parallelism")),
        "drop_wait": values.get("dropWait", "airflow"),
    }
    return json.dumps(settings, indent=2) + "\n"


def render(values: Values) -> dict[str, str]:
    """File name -> text of every rendered file."""
    tokens = tokens_for(values)
    out: dict[str, str] = {}
    for name in BASE_FILES:
        text = (BASE_DIR / name).read_text()
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
        docs = PER_FILE.get(name, lambda d, _v: d)(docs, values)
        if not docs:
            continue
        docs = substitute(docs, tokens)
        notes = leading_comment(text).replace("# BASE: ", "# ", 1)
        out[name] = generated_header(f"deploy/base/{name}", values) + notes + "\n" + dump(docs)
    out["configmap.yaml"] = generated_header("config files", values) + render_configmap(values)
    out["configmap-env.yaml"] = generated_header("env", values) + render_env(values)
    out[AIRFLOW_FILE] = airflow_settings(values)
    leftover = [f"{n}: {t}" for n, text in out.items() for t in ("DATASET", "DIGEST", "PROXY_SECRET", "/MAIN")
                if re.search(rf"(?m)^[^#]*{t}", text)]
    if leftover:
        raise ValuesError(f"{values.path}: placeholders left unreplaced ({', '.join(leftover)})")
    return out


def drift(rendered: dict[str, str], folder: Path) -> list[str]:
    """What differs between a render and a folder of rendered files."""
    problems = [f"{name} differs" for name, text in rendered.items()
                if not (folder / name).is_file() or (folder / name).read_text() != text]
    stale = sorted({p.name for p in folder.glob("*.yaml")} | {p.name for p in folder.glob("*.json")}) if folder.is_dir() else []
    problems += [f"{name} is not rendered from the values" for name in stale if name not in rendered]
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--values", type=Path, default=DEFAULT_VALUES, help="a dataset's values file")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for the rendered files")
    parser.add_argument("--image-digest", help="the silverline image's digest (the release step's)")
    parser.add_argument("--helper-digest", help="the helper (python) image's digest")
    parser.add_argument("--proxy-digest", help="the oauth2-proxy image's digest")
    parser.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    parser.add_argument("--print", dest="print_file", metavar="FILE", help="print one rendered file (e.g. configmap.yaml)")
    args = parser.parse_args(argv)
    try:
        values = load_values(args.values, image_digest=args.image_digest, helper_digest=args.helper_digest,
                             proxy_digest=args.proxy_digest)
        rendered = render(values)
    except ValuesError as err:
        print(f"render: {err}", file=sys.stderr)
        return 2
    if args.print_file:
        if args.print_file not in rendered:
            print(f"render: no rendered file {args.print_file} (have: {', '.join(rendered)})", file=sys.stderr)
            return 2
        sys.stdout.write(rendered[args.print_file])
        return 0
    if args.check:
        problems = drift(rendered, args.out)
        for problem in problems:
            print(f"render: {args.out}/{problem}", file=sys.stderr)
        if problems:
            print(f"render: re-render with python3 deploy/render.py --values {args.values} --out {args.out}", file=sys.stderr)
        return 1 if problems else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name in drift(rendered, args.out):
        if name.endswith(" is not rendered from the values"):
            (args.out / name.split(" ")[0]).unlink()
    for name, text in rendered.items():
        (args.out / name).write_text(text)
    print(f"rendered {len(rendered)} files for dataset {values.dataset} into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
