"""Tests for deploy/airflow/silverline_dag.py against a real Airflow + cncf-kubernetes provider.

    deploy/validate.sh            installs both into a venv and runs this file
    pytest deploy/airflow/test_dag_import.py

Needs no cluster and no Airflow database: the DAG is parsed with Airflow's own
DagBag (what the scheduler's DAG processor does), and the exit-code handling
of SilverlinePodOperator is exercised on kubernetes client V1Pod objects with
the provider's pod cleanup stubbed out. The alert is posted to a webhook
served on 127.0.0.1 by the test itself.
"""

from __future__ import annotations

import http.server
import importlib.util
import inspect
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from unittest import mock

import pytest

HERE = Path(__file__).resolve().parent
DAG_FILE = HERE / "silverline_dag.py"
# The shipped dataset's settings, as deploy/render.py renders them.
DATASET_FILE = HERE.parent / "k8s" / "airflow-dataset.json"
DAG_ID = "silverline_credit_statements_monthly_cycle"
os.environ["SILVERLINE_DATASET_FILE"] = str(DATASET_FILE)

# Airflow reads its config at import: keep it out of ~/airflow and quiet.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="silverline-airflow-home-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(HERE))
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")

pytest.importorskip("airflow", reason="apache-airflow is not installed (deploy/validate.sh installs it)")
pytest.importorskip("airflow.providers.cncf.kubernetes", reason="apache-airflow-providers-cncf-kubernetes is not installed")

from kubernetes.client import models as k8s  # noqa: E402


def load_module(name: str = "silverline_dag_under_test"):
    spec = importlib.util.spec_from_file_location(name, DAG_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sdag():
    return load_module()


_BAG = []


def dagbag():
    """The DAG file parsed by Airflow's DagBag, once per test session."""
    if not _BAG:
        try:
            from airflow.dag_processing.dagbag import DagBag  # Airflow 3
        except ImportError:  # Airflow 2.x
            from airflow.models.dagbag import DagBag
        kwargs = {"dag_folder": str(DAG_FILE)}
        if "include_examples" in inspect.signature(DagBag.__init__).parameters:  # Airflow 2.x, early 3.x
            kwargs["include_examples"] = False
        _BAG.append(DagBag(**kwargs))
    return _BAG[0]


def finished_pod(exit_code: int | None, container: str = "base") -> k8s.V1Pod:
    state = (
        k8s.V1ContainerState(terminated=k8s.V1ContainerStateTerminated(exit_code=exit_code))
        if exit_code is not None
        else k8s.V1ContainerState(waiting=k8s.V1ContainerStateWaiting(reason="ContainerCreating"))
    )
    status = k8s.V1ContainerStatus(
        name=container, state=state, image="silverline:0.1.0", image_id="", ready=False, restart_count=0
    )
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="silverline-bank-a-x1"),
        status=k8s.V1PodStatus(phase="Failed" if exit_code else "Succeeded", container_statuses=[status]),
    )


# --------------------------------------------------------------------------
# the DAG as Airflow parses it


def test_dagbag_imports_the_dag_without_errors():
    bag = dagbag()
    assert bag.import_errors == {}, bag.import_errors
    assert DAG_ID in bag.dags


def test_run_drop_is_mapped_over_contributors_with_bounded_parallelism():
    dag = dagbag().dags[DAG_ID]
    assert {t.task_id for t in dag.tasks} == {"plan_drops", "run_drop"}
    run_drop = dag.get_task("run_drop")
    assert type(run_drop).__name__ == "MappedOperator", type(run_drop)
    assert run_drop.operator_class.__name__ == "SilverlinePodOperator"
    assert run_drop.upstream_task_ids == {"plan_drops"}
    assert run_drop.max_active_tis_per_dag == 8
    assert run_drop.retries == 3
    assert run_drop.on_failure_callback
    partial = run_drop.partial_kwargs
    assert partial["cmds"] == ["silverline"]
    assert partial["service_account_name"] == "silverline"
    assert partial["deferrable"] is False
    assert partial["container_security_context"].read_only_root_filesystem is True
    assert partial["security_context"].run_as_non_root is True
    mounts = {m.mount_path for m in partial["volume_mounts"]}
    assert {"/etc/silverline", "/tmp"} <= mounts


def test_map_index_label_is_the_contributor(sdag):
    from types import SimpleNamespace

    dag = dagbag().dags[DAG_ID]
    template = dag.get_task("run_drop").map_index_template
    arguments = sdag.drop_kwargs(["BNPL_7"], "2026-11")[0]["arguments"]
    env = dag.get_template_env()
    assert env.from_string(template).render(task=SimpleNamespace(arguments=arguments)) == "BNPL_7"


def test_dag_schedule_and_params():
    dag = dagbag().dags[DAG_ID]
    assert dag.max_active_runs == 1
    assert set(dag.params.keys()) >= {"cycle", "contributors"}


# --------------------------------------------------------------------------
# what each contributor's pod runs


def test_drop_kwargs_one_pod_per_contributor(sdag):
    kwargs = sdag.drop_kwargs(["BANK_A", "BNPL_7"], "2026-11")
    assert [k["arguments"] for k in kwargs] == [
        ["run", "--config", "/etc/silverline/credit_statements.toml", "--contributor", "BANK_A", "--drop", "2026-11"],
        ["run", "--config", "/etc/silverline/credit_statements.toml", "--contributor", "BNPL_7", "--drop", "2026-11"],
    ]
    assert [k["name"] for k in kwargs] == ["silverline-bank-a", "silverline-bnpl-7"]
    assert kwargs[0]["labels"]["silverline.io/contributor"] == "bank-a"


@pytest.mark.parametrize("cycle", ["2026-13", "2026-1", "26-11", "", "2026-11-01"])
def test_drop_kwargs_refuses_a_bad_cycle(sdag, cycle):
    with pytest.raises(sdag.AirflowFailException):
        sdag.drop_kwargs(["BANK_A"], cycle)


def test_drop_kwargs_refuses_duplicates_and_empty(sdag):
    for contributors in ([], ["BANK_A", "BANK_A"]):
        with pytest.raises(sdag.AirflowFailException):
            sdag.drop_kwargs(contributors, "2026-11")


def test_previous_month(sdag):
    import pendulum

    assert sdag.previous_month(pendulum.datetime(2026, 12, 5, 6, tz="UTC")) == "2026-11"
    assert sdag.previous_month(pendulum.datetime(2027, 1, 5, tz="UTC")) == "2026-12"


# --------------------------------------------------------------------------
# retries only for exit code 3


def make_operator(sdag):
    return sdag.SilverlinePodOperator(task_id="run_drop_test", image="silverline:0.1.0", cmds=["silverline"])


# silverline's last lines on a committed run (its real output format, src/cli.rs print_outcome)
COMMITTED_LINES = [
    '{"level":"INFO","message":"run finished"}',
    "committed 998 rows to silver.credit_statements in snapshot 4242 (received 1000, quarantined 2, dropped 0, warned 5)",
    "timings: read 0.4s, judge 1.2s, commit 0.3s",
    "summary: s3://example-lake/dq_error/summaries/contributor=BANK_A/drop=2026-11/run.json",
]


def cleanup_with(sdag, exit_code, parent_raises=True, lines=(), waiting_since=None):
    op = make_operator(sdag)
    op.arguments = ["run", "--config", "/etc/silverline/c.toml", "--contributor", "BANK_A", "--drop", "2026-11"]
    op.waiting_since = waiting_since
    pod = finished_pod(exit_code)
    parent = mock.patch.object(
        sdag.KubernetesPodOperator,
        "cleanup",
        side_effect=sdag.AirflowException(f"Pod {pod.metadata.name} returned a failure.") if parent_raises else None,
    )
    with parent, mock.patch.object(sdag.SilverlinePodOperator, "read_last_lines", return_value=list(lines)):
        op.cleanup(pod, pod)
    return op


@pytest.mark.parametrize("exit_code", [1, 2, 101, 137])
def test_exit_codes_other_than_3_fail_without_retry(sdag, exit_code):
    with pytest.raises(sdag.SilverlineRunFailed) as caught:
        cleanup_with(sdag, exit_code)
    assert isinstance(caught.value, sdag.AirflowFailException)  # Airflow does not retry these
    assert caught.value.exit_code == exit_code
    assert f"silverline exited {exit_code}" in str(caught.value)


@pytest.mark.parametrize("exit_code", [3, None])
def test_exit_code_3_and_unfinished_pods_stay_retryable(sdag, exit_code):
    with pytest.raises(sdag.AirflowException) as caught:
        cleanup_with(sdag, exit_code)
    assert not isinstance(caught.value, sdag.AirflowFailException)
    assert "returned a failure" in str(caught.value)


def test_success_passes_through_and_keeps_the_summary_for_xcom(sdag):
    op = cleanup_with(sdag, 0, parent_raises=False, lines=COMMITTED_LINES)
    assert op.summary == {
        "contributor": "BANK_A",
        "drop": "2026-11",
        "exit_code": 0,
        "summary_url": "s3://example-lake/dq_error/summaries/contributor=BANK_A/drop=2026-11/run.json",
        "outcome": COMMITTED_LINES[1],
    }


def test_exit_4_a_concurrent_commit_is_a_success(sdag):
    op = cleanup_with(sdag, 4, lines=["BANK_A/2026-11: a concurrent run of the same drop committed it (s1) while this one ran: nothing added"])
    assert op.summary["exit_code"] == 4
    assert "concurrent run" in op.summary["outcome"]


def test_execute_returns_the_summary_as_the_return_value_xcom(sdag):
    op = make_operator(sdag)
    op.summary = {"summary_url": "s3://x/summary.json"}
    dag_run = mock.Mock(start_date=None, run_after=None)
    with mock.patch.object(sdag.KubernetesPodOperator, "execute", return_value=None):
        assert op.execute({"dag_run": dag_run}) == {"summary_url": "s3://x/summary.json"}


def test_a_data_failure_keeps_its_summary_too(sdag):
    with pytest.raises(sdag.SilverlineRunFailed):
        cleanup_with(sdag, 1, lines=["fail rule volume fired", "summary: s3://l/dq_error/s.json"])


def test_summary_without_a_summary_line_is_empty_not_an_error(sdag):
    got = sdag.summary_from_log(["panic"], ["run", "--contributor", "X", "--drop", "2026-01"], 101)
    assert got == {"contributor": "X", "drop": "2026-01", "exit_code": 101, "summary_url": None, "outcome": None}


def test_exit_5_reschedules_the_task_until_the_drop_wait_times_out(sdag):
    from datetime import datetime, timedelta, timezone

    assert sdag.DROP_WAIT_POKE == timedelta(minutes=30)  # the shipped values' dropWait.airflow
    assert sdag.DROP_WAIT_TIMEOUT == timedelta(hours=48)
    started = datetime.now(timezone.utc) - timedelta(hours=1)
    with pytest.raises(sdag.AirflowRescheduleException) as caught:
        cleanup_with(sdag, 5, waiting_since=started)
    wait = caught.value.reschedule_date - datetime.now(timezone.utc)
    assert timedelta(minutes=29) < wait <= timedelta(minutes=30)
    # past the timeout: a final failure, not retried, alerted as drop_not_arrived
    with pytest.raises(sdag.SilverlineRunFailed) as failed:
        cleanup_with(sdag, 5, waiting_since=started - timedelta(hours=48))
    assert failed.value.exit_code == 5
    assert sdag.alert_payload({"exception": failed.value})["kind"] == "drop_not_arrived"


def test_the_dag_follows_another_datasets_settings(monkeypatch, tmp_path):
    settings = json.loads(DATASET_FILE.read_text())
    settings.update(dataset="loans-demo", contributors=["LENDER_1", "LENDER_2", "co.op-3"],
                    config_map="silverline-loans-demo-config", env_config_map="silverline-loans-demo-env",
                    config_items=[{"key": "loans.toml", "path": "loans.toml"}], config_file="/etc/silverline/loans.toml",
                    parallelism=2, drop_wait={"pokeInterval": "1h", "timeout": "24h"})
    path = tmp_path / "silverline_dataset.json"
    path.write_text(json.dumps(settings))
    monkeypatch.setenv("SILVERLINE_DATASET_FILE", str(path))
    other = load_module("silverline_dag_other_dataset")
    assert other.DAG_ID == "silverline_loans_demo_monthly_cycle"
    assert other.DEFAULT_CONTRIBUTORS == ["LENDER_1", "LENDER_2", "co.op-3"]
    assert other.MAX_PARALLEL == 2
    assert other.CONFIG_VOLUME.config_map.name == "silverline-loans-demo-config"
    assert [i.path for i in other.CONFIG_VOLUME.config_map.items] == ["loans.toml"]
    kwargs = other.drop_kwargs(["LENDER_1"], "2026-11")[0]
    assert kwargs["arguments"][2] == "/etc/silverline/loans.toml"
    assert kwargs["labels"]["silverline.io/dataset"] == "loans-demo"


def test_a_missing_dataset_file_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("SILVERLINE_DATASET_FILE", str(tmp_path / "none.json"))
    with pytest.raises(RuntimeError, match="render them with deploy/render.py"):
        load_module("silverline_dag_no_dataset")


def test_a_skip_is_not_turned_into_a_failure(sdag):
    op = make_operator(sdag)
    pod = finished_pod(1)
    with mock.patch.object(sdag.KubernetesPodOperator, "cleanup", side_effect=sdag.AirflowSkipException("skip")):
        with pytest.raises(sdag.AirflowSkipException):
            op.cleanup(pod, pod)


def test_container_exit_code_reads_the_named_container(sdag):
    assert sdag.container_exit_code(finished_pod(3)) == 3
    assert sdag.container_exit_code(finished_pod(3, container="other")) is None
    assert sdag.container_exit_code(None) is None


# --------------------------------------------------------------------------
# the alert


class Webhook(http.server.BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        length = int(self.headers.get("Content-Length", 0))
        Webhook.received.append(json.loads(self.rfile.read(length)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture()
def webhook():
    Webhook.received = []
    server = http.server.HTTPServer(("127.0.0.1", 0), Webhook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/hook"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_exit_1_alerts_as_a_data_failure(sdag, webhook, monkeypatch):
    monkeypatch.setenv("SILVERLINE_ALERT_WEBHOOK", webhook)
    with pytest.raises(sdag.SilverlineRunFailed) as caught:
        cleanup_with(sdag, 1)
    ti = mock.Mock(dag_id=DAG_ID, run_id="scheduled__2026-12-05", task_id="run_drop")
    ti.rendered_map_index = "BANK_A"
    sdag.alert_on_failure({"exception": caught.value, "ti": ti, "params": {"cycle": "2026-11"}})
    assert len(Webhook.received) == 1
    alert = Webhook.received[0]
    assert alert["kind"] == "data_failure"
    assert alert["exit_code"] == 1
    assert alert["contributor"] == "BANK_A"
    assert alert["cycle"] == "2026-11"


def test_infrastructure_failure_after_retries_alerts_too(sdag, webhook):
    payload = sdag.alert_payload({"exception": sdag.AirflowException("Pod x returned a failure."), "params": {}})
    assert payload["kind"] == "infrastructure_failure"
    assert sdag.post_alert(payload, webhook=webhook) is True
    assert Webhook.received[0]["kind"] == "infrastructure_failure"


def test_alert_without_webhook_only_logs(sdag, monkeypatch):
    monkeypatch.delenv("SILVERLINE_ALERT_WEBHOOK", raising=False)
    assert sdag.post_alert({"kind": "data_failure"}) is False


def test_a_broken_webhook_does_not_raise_from_the_callback(sdag, monkeypatch):
    monkeypatch.setenv("SILVERLINE_ALERT_WEBHOOK", "http://127.0.0.1:9/unreachable")
    sdag.alert_on_failure({"exception": sdag.SilverlineRunFailed("x", 1), "params": {}})


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
