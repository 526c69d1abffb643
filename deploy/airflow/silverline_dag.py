"""silverline monthly cycle as an Airflow DAG: one Kubernetes pod per contributor drop.

Drop this file in the DAGs folder of an Airflow 3 deployment with the
``apache-airflow-providers-cncf-kubernetes`` provider, with the dataset's
settings beside it: ``airflow-dataset.json``, rendered by deploy/render.py
from the dataset's values (names, image digest, config files, contributors,
the wait for a late drop), copied as ``silverline_dataset.json`` or named by
env ``SILVERLINE_DATASET_FILE``. It runs the same image, ServiceAccount,
ConfigMaps and Secrets as deploy/k8s (see deploy/README.md).

Fan-out: ``run_drop`` is mapped (dynamic task mapping) over the contributor
list, one mapped task instance = one pod = one ``silverline run``, at most
``MAX_PARALLEL`` at a time. All of them commit to the same Silver table; the
REST catalog's optimistic concurrency keeps them correct.

Retries by exit code. Airflow retries any failed task instance, and the
KubernetesPodOperator cannot filter retries by the container's exit code.
So ``SilverlinePodOperator`` reads the exit code of the finished pod and, for
every code but 3, raises ``AirflowFailException``, which Airflow never
retries; for 3 (infrastructure: storage or catalog down, a commit conflict)
it lets the provider's ordinary failure through, and ``retries`` applies.

    exit 0  committed or already committed          success
    exit 1  data failure, nothing committed         fail now, alert (data_failure)
    exit 2  usage / configuration error             fail now, alert (config_error)
    exit 3  infrastructure error, retry is safe     retried (3 times, backoff)
    exit 4  a concurrent run committed the drop     success: nothing to do
    exit 5  the drop has not arrived yet            rescheduled (a sensor's wait:
                                                    UP_FOR_RESCHEDULE, no worker
                                                    slot held) every drop_wait
                                                    pokeInterval, failed after
                                                    its timeout
    other   panic (101), OOM kill (137), ...        fail now, alert
    none    pod never ran to the end (eviction,     retried, like 3: the run did
            image pull, scheduling timeout)         not decide anything

Alert: ``on_failure_callback`` runs once a task instance has finally failed
(after its retries) and posts JSON to the webhook in env
``SILVERLINE_ALERT_WEBHOOK`` on the Airflow workers (logs it if unset);
exit 1 is reported as ``data_failure``: a human has to look at the drop.

XCom: a run that ends (committed, or a data failure) pushes its summary as
the task's return value: ``{"contributor", "drop", "exit_code",
"summary_url", "outcome"}``, read from the last lines silverline prints
(``summary: <url>`` is the run's JSON summary under the dq_error root).

Settings (env on the scheduler / workers, read when the DAG file is parsed):
SILVERLINE_DATASET_FILE, SILVERLINE_IMAGE (overrides the rendered digest),
SILVERLINE_NAMESPACE, SILVERLINE_K8S_CONN_ID, SILVERLINE_CONTRIBUTORS (JSON
list, overrides the rendered list as the ``contributors`` param's default),
SILVERLINE_ALERT_WEBHOOK.
"""

from __future__ import annotations

import json
import logging
import os
import re
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pendulum
from kubernetes.client import models as k8s

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

try:  # Airflow 3: the task SDK
    from airflow.sdk import DAG, Param, task
except ImportError:  # Airflow 2.x
    from airflow import DAG
    from airflow.decorators import task
    from airflow.models.param import Param

try:  # resolves to the task SDK's exceptions on Airflow 3, airflow.exceptions on 2.x
    from airflow.providers.common.compat.sdk import (
        AirflowException,
        AirflowFailException,
        AirflowSkipException,
    )
except ImportError:
    from airflow.exceptions import AirflowException, AirflowFailException, AirflowSkipException
try:  # Airflow 3: what the task runner turns into UP_FOR_RESCHEDULE
    from airflow.sdk.exceptions import AirflowRescheduleException
except ImportError:
    from airflow.exceptions import AirflowRescheduleException

log = logging.getLogger(__name__)

DURATION_RE = re.compile(r"^(\d+)([smhd])$")


def duration(text: str) -> timedelta:
    """A values duration (30m, 48h, ...) as a timedelta."""
    m = DURATION_RE.match(str(text))
    if not m:
        raise ValueError(f"duration {text!r}: a number and one of s, m, h, d")
    unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[m.group(2)]
    return timedelta(**{unit: int(m.group(1))})


def load_dataset(path: Path) -> dict[str, Any]:
    """The dataset's settings rendered by deploy/render.py (airflow-dataset.json)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise RuntimeError(
            f"silverline: cannot read the dataset settings {path} ({err}); render them with "
            "deploy/render.py and set SILVERLINE_DATASET_FILE"
        ) from err


DATASET = load_dataset(
    Path(os.environ.get("SILVERLINE_DATASET_FILE") or Path(__file__).with_name("silverline_dataset.json"))
)
DAG_ID = f"silverline_{DATASET['dataset'].replace('-', '_')}_monthly_cycle"
IMAGE = os.environ.get("SILVERLINE_IMAGE") or DATASET["image"]
NAMESPACE = os.environ.get("SILVERLINE_NAMESPACE", "silverline")
K8S_CONN_ID = os.environ.get("SILVERLINE_K8S_CONN_ID", "kubernetes_default")
DEFAULT_CONTRIBUTORS = json.loads(os.environ.get("SILVERLINE_CONTRIBUTORS") or json.dumps(DATASET["contributors"]))
CONFIG_FILE = DATASET["config_file"]
MAX_PARALLEL = int(DATASET["parallelism"])
DROP_WAIT_POKE = duration(DATASET["drop_wait"]["pokeInterval"])
DROP_WAIT_TIMEOUT = duration(DATASET["drop_wait"]["timeout"])
CONTAINER = "base"  # the provider's name for the main container

EXIT_COMMITTED = 0
EXIT_DATA_FAILURE = 1
EXIT_CONFIG_ERROR = 2
EXIT_INFRASTRUCTURE = 3
EXIT_COMMITTED_CONCURRENTLY = 4
EXIT_DROP_NOT_ARRIVED = 5

CYCLE_RE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")


# --------------------------------------------------------------------------
# exit codes -> retry or not


class SilverlineRunFailed(AirflowFailException):
    """A silverline run that must not be retried (Airflow never retries AirflowFailException)."""

    def __init__(self, message: str, exit_code: int | None) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def container_exit_code(remote_pod: k8s.V1Pod | None, container: str = CONTAINER) -> int | None:
    """The exit code of `container` in a finished pod, or None if it did not terminate."""
    statuses = (remote_pod.status.container_statuses if remote_pod and remote_pod.status else None) or []
    for status in statuses:
        if status.name == container and status.state and status.state.terminated:
            return status.state.terminated.exit_code
    return None


def classify_failure(
    exit_code: int | None, error: BaseException, waiting_since: datetime | None = None,
    now: datetime | None = None,
) -> BaseException:
    """The exception a failed run should end with: `error` itself if a retry is safe, a reschedule
    while the drop has not arrived (until DROP_WAIT_TIMEOUT after `waiting_since`), else a
    non-retryable one."""
    if exit_code is None or exit_code == EXIT_INFRASTRUCTURE:
        return error
    now = now or datetime.now(timezone.utc)
    if exit_code == EXIT_DROP_NOT_ARRIVED:
        if waiting_since is None or now - waiting_since < DROP_WAIT_TIMEOUT:
            return AirflowRescheduleException(reschedule_date=now + DROP_WAIT_POKE)
        return SilverlineRunFailed(
            f"silverline exited 5: the drop has not arrived {DROP_WAIT_TIMEOUT} after the run started. Not retried.",
            exit_code,
        )
    meaning = {
        EXIT_DATA_FAILURE: "data failure: nothing committed; look at the drop and its run summary",
        EXIT_CONFIG_ERROR: "usage or configuration error: nothing read",
    }.get(exit_code, "unexpected exit code (a crash?)")
    return SilverlineRunFailed(f"silverline exited {exit_code}: {meaning}. Not retried.\n{error}", exit_code)


SUMMARY_LINE = re.compile(r"^summary: (\S+)\s*$")


def summary_from_log(lines: list[str], arguments: list[str], exit_code: int | None) -> dict[str, Any]:
    """What the task pushes to XCom: the run's summary URL and outcome line, from silverline's last lines."""
    def arg(flag: str) -> str | None:
        return arguments[arguments.index(flag) + 1] if flag in arguments[:-1] else None

    url = next((m.group(1) for line in reversed(lines) if (m := SUMMARY_LINE.match(line.strip()))), None)
    outcome = next(
        (line.strip() for line in reversed(lines)
         if line.startswith(("committed ", "dry run: ")) or ": already committed" in line
         or "a concurrent run of the same drop committed it" in line),
        None,
    )
    return {"contributor": arg("--contributor"), "drop": arg("--drop"), "exit_code": exit_code,
            "summary_url": url, "outcome": outcome}


class SilverlinePodOperator(KubernetesPodOperator):
    """KubernetesPodOperator whose failures are retried only when silverline exits 3.

    The provider raises a plain AirflowException from ``cleanup`` when the pod
    failed; this override replaces it with a non-retryable
    ``SilverlineRunFailed`` unless the exit code says a retry is safe.
    Runs in the worker (``deferrable=False``), where ``cleanup`` sees the pod.
    """

    summary: dict[str, Any] | None = None
    waiting_since: datetime | None = None

    def execute(self, context: Any) -> dict[str, Any] | None:
        dag_run = context.get("dag_run")
        self.waiting_since = getattr(dag_run, "start_date", None) or getattr(dag_run, "run_after", None)
        super().execute(context)
        return self.summary  # the task's return_value XCom

    def read_last_lines(self, pod: k8s.V1Pod) -> list[str]:
        """silverline's last stdout/stderr lines (the summary URL is among them); [] if unreadable."""
        try:
            logs = self.pod_manager.read_pod_logs(pod, self.base_container_name, tail_lines=40, follow=False)
            return [raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw) for raw in logs]
        except Exception:  # the summary is a convenience: never fail a run over it
            log.warning("silverline: could not read the pod's last lines for the summary", exc_info=True)
            return []

    def cleanup(self, pod: k8s.V1Pod, remote_pod: k8s.V1Pod, *args: Any, **kwargs: Any) -> None:
        exit_code = container_exit_code(remote_pod, self.base_container_name)
        if exit_code is not None:
            self.summary = summary_from_log(self.read_last_lines(remote_pod or pod), list(self.arguments or []), exit_code)
        try:
            super().cleanup(pod, remote_pod, *args, **kwargs)
        except AirflowSkipException:
            raise
        except AirflowException as error:
            if exit_code == EXIT_COMMITTED_CONCURRENTLY:
                log.info("silverline: a concurrent run of the same drop committed it; nothing to do")
                return
            replacement = classify_failure(exit_code, error, self.waiting_since)
            if replacement is error:
                raise
            raise replacement from error


# --------------------------------------------------------------------------
# alerting


def alert_payload(context: dict[str, Any]) -> dict[str, Any]:
    error = context.get("exception")
    exit_code = getattr(error, "exit_code", None)
    kind = {
        EXIT_DATA_FAILURE: "data_failure",
        EXIT_CONFIG_ERROR: "config_error",
        EXIT_DROP_NOT_ARRIVED: "drop_not_arrived",
    }.get(exit_code, "infrastructure_failure" if exit_code is None else "crash")
    ti = context.get("ti") or context.get("task_instance")
    contributor = None
    try:
        contributor = ti.rendered_map_index or None
    except AttributeError:
        pass
    params = context.get("params") or {}
    return {
        "kind": kind,
        "exit_code": exit_code,
        "dag_id": getattr(ti, "dag_id", DAG_ID),
        "run_id": getattr(ti, "run_id", None),
        "task_id": getattr(ti, "task_id", None),
        "contributor": contributor,
        "cycle": params.get("cycle"),
        "text": f"silverline {kind} (exit {exit_code}) for {contributor or 'a contributor'}: {str(error)[:500]}",
    }


def post_alert(payload: dict[str, Any], webhook: str | None = None, timeout: float = 30) -> bool:
    """POSTs the alert as JSON; logs it when no webhook is configured. True if it was posted."""
    webhook = webhook or os.environ.get("SILVERLINE_ALERT_WEBHOOK")
    log.error("silverline alert: %s", json.dumps(payload))
    if not webhook:
        log.error("SILVERLINE_ALERT_WEBHOOK is not set: the alert above is only logged")
        return False
    request = urllib.request.Request(
        webhook,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return 200 <= response.status < 300


def alert_on_failure(context: dict[str, Any]) -> None:
    """on_failure_callback: called once a run has finally failed (retries exhausted or not retryable)."""
    try:
        post_alert(alert_payload(context))
    except Exception:  # an alerting problem must not hide the task's own failure
        log.exception("silverline: posting the alert failed")


# --------------------------------------------------------------------------
# the pods


def previous_month(when: pendulum.DateTime | None) -> str:
    when = when or pendulum.now("UTC")
    return when.in_timezone("UTC").start_of("month").subtract(months=1).format("YYYY-MM")


def pod_name(contributor: str) -> str:
    """A DNS-1123 pod name for a contributor id (the provider appends a random suffix)."""
    name = re.sub(r"[^a-z0-9-]+", "-", contributor.lower()).strip("-")
    return f"silverline-{name}"[:50].rstrip("-")


def drop_kwargs(contributors: list[str], cycle: str) -> list[dict[str, Any]]:
    """One set of pod arguments per contributor: what run_drop is mapped over."""
    if not CYCLE_RE.match(cycle):
        raise AirflowFailException(f"cycle must be YYYY-MM, got {cycle!r}")
    if not contributors or len(set(contributors)) != len(contributors):
        raise AirflowFailException(f"contributors must be a non-empty list without duplicates, got {contributors!r}")
    return [
        {
            "name": pod_name(contributor),
            "arguments": [
                "run",
                "--config",
                CONFIG_FILE,
                "--contributor",
                contributor,
                "--drop",
                cycle,
            ],
            "labels": {
                "app.kubernetes.io/name": "silverline",
                "app.kubernetes.io/component": "ingest",
                "silverline.io/contributor": pod_name(contributor).removeprefix("silverline-"),
                "silverline.io/cycle": cycle,
                "silverline.io/dataset": DATASET["dataset"],
            },
        }
        for contributor in contributors
    ]


CONFIG_VOLUME = k8s.V1Volume(
    name="config",
    config_map=k8s.V1ConfigMapVolumeSource(
        name=DATASET["config_map"],
        items=[k8s.V1KeyToPath(key=item["key"], path=item["path"]) for item in DATASET["config_items"]],
    ),
)
TMP_VOLUME = k8s.V1Volume(name="tmp", empty_dir=k8s.V1EmptyDirVolumeSource(size_limit="2Gi"))


def secret_env(name: str, key: str) -> k8s.V1EnvVar:
    return k8s.V1EnvVar(
        name=name,
        value_from=k8s.V1EnvVarSource(
            secret_key_ref=k8s.V1SecretKeySelector(name="silverline-rest-catalog", key=key, optional=True)
        ),
    )


with DAG(
    dag_id=DAG_ID,
    description="silverline: every contributor's monthly drop, bronze to Silver, one pod each",
    # 06:00 UTC on the 5th: the previous month's drops are in by then.
    schedule=DATASET["schedule"],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["silverline", "iceberg", "ingest"],
    params={
        "cycle": Param(
            "",
            type="string",
            pattern=r"^(\d{4}-\d{2})?$",
            description="Drop id of the cycle (YYYY-MM). Empty: the month before the run's logical date.",
        ),
        "contributors": Param(
            DEFAULT_CONTRIBUTORS,
            type="array",
            items={"type": "string", "minLength": 1},
            minItems=1,
            description="Contributor ids, one pod each.",
        ),
    },
    default_args={"owner": "data-platform"},
) as dag:

    @task
    def plan_drops(params: dict | None = None, logical_date: pendulum.DateTime | None = None) -> list[dict]:
        params = params or {}
        cycle = params.get("cycle") or previous_month(logical_date)
        return drop_kwargs(list(params.get("contributors") or DEFAULT_CONTRIBUTORS), cycle)

    SilverlinePodOperator.partial(
        task_id="run_drop",
        kubernetes_conn_id=K8S_CONN_ID,
        namespace=NAMESPACE,
        image=IMAGE,
        cmds=["silverline"],
        service_account_name="silverline",
        automount_service_account_token=False,
        env_vars=[
            k8s.V1EnvVar(name="SILVERLINE_LOG_FORMAT", value="json"),
            secret_env("SILVERLINE_REST_CREDENTIAL", "credential"),
            secret_env("SILVERLINE_REST_TOKEN", "token"),
        ],
        env_from=[k8s.V1EnvFromSource(config_map_ref=k8s.V1ConfigMapEnvSource(name=DATASET["env_config_map"]))],
        volumes=[CONFIG_VOLUME, TMP_VOLUME],
        volume_mounts=[
            k8s.V1VolumeMount(name="config", mount_path="/etc/silverline", read_only=True),
            k8s.V1VolumeMount(name="tmp", mount_path="/tmp"),
        ],
        container_resources=k8s.V1ResourceRequirements(
            requests={"cpu": "1", "memory": "2Gi", "ephemeral-storage": "1Gi"},
            limits={"cpu": "1", "memory": "2Gi", "ephemeral-storage": "2Gi"},
        ),
        security_context=k8s.V1PodSecurityContext(
            run_as_non_root=True,
            run_as_user=65532,
            run_as_group=65532,
            fs_group=65532,
            seccomp_profile=k8s.V1SeccompProfile(type="RuntimeDefault"),
        ),
        container_security_context=k8s.V1SecurityContext(
            allow_privilege_escalation=False,
            read_only_root_filesystem=True,
            privileged=False,
            capabilities=k8s.V1Capabilities(drop=["ALL"]),
        ),
        termination_message_policy="FallbackToLogsOnError",
        active_deadline_seconds=7200,
        get_logs=True,
        log_events_on_failure=True,
        on_finish_action="delete_succeeded_pod",
        deferrable=False,
        # Retries: only reached for exit 3 (or a pod that never finished).
        retries=3,
        retry_delay=timedelta(minutes=1),
        retry_exponential_backoff=True,
        max_retry_delay=timedelta(minutes=30),
        max_active_tis_per_dag=MAX_PARALLEL,
        execution_timeout=timedelta(hours=2),
        on_failure_callback=alert_on_failure,
        # The UI labels each mapped instance with its contributor id (a
        # slice, so the label can never fail to render).
        map_index_template="{{ task.arguments[4:5] | join('') }}",
    ).expand_kwargs(plan_drops())
