"""Static operability checks, no Docker engine: dashboards as data, PromQL through promtool,
Prometheus configs, compose and Kubernetes schemas, the systemd unit, the Dockerfile."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from monitor import metrics

from .grafana_queries import (
    ALERTS,
    DASHBOARDS,
    REPO,
    alert_rules,
    load,
    metric_names,
    panels,
    parse_label_values,
    queries,
    referenced_variables,
    substitute,
    variable_query,
    variables,
)

pytestmark = pytest.mark.ops
DEPLOY = REPO / "deploy"
VENV_BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """A command-line tool, or a skip (a failure under CI, where .ci/run installs it)."""
    found = shutil.which(name) or (str(VENV_BIN / name) if (VENV_BIN / name).exists() else None)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is required in CI (apt-get install -y prometheus / pip)")
        pytest.skip(f"{name} not installed (Debian package 'prometheus' / PyPI)")
    return found


def run(*cmd: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120)


def exported_names() -> set[str]:
    """Every sample name the service's registry can export (histogram suffixes included)."""
    names = set()
    for family in metrics.registry.collect():
        names.add(family.name)
        names.update(s.name for s in family.samples)
        if family.type == "histogram":
            names.update(family.name + suffix for suffix in ("_bucket", "_sum", "_count"))
        if family.type == "counter":
            names.add(family.name + "_total")
    return names


# ---- dashboards -----------------------------------------------------------------------
def test_dashboards_are_generated_and_current() -> None:
    assert {p.name for p in DASHBOARDS} == {"overview.json", "token.json", "delivery.json",
                                          "vaults.json"}
    result = run(sys.executable, REPO / "grafana" / "build_dashboards.py", "--check")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_is_wired(path: Path) -> None:
    dash = load(path)
    assert dash["uid"] and dash["title"] and dash["panels"]
    ids = [p["id"] for p in panels(dash)]
    assert len(ids) == len(set(ids)), f"duplicate panel ids in {path.name}"
    declared = {v["name"] for v in variables(dash)}
    ds_var = [v for v in variables(dash) if v["type"] == "datasource"]
    assert len(ds_var) == 1 and ds_var[0]["query"] == "prometheus"
    titles = set()
    for p in panels(dash):
        if p["type"] == "row":
            continue
        assert p["title"] not in titles, f"duplicate title {p['title']}"
        titles.add(p["title"])
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], f"panel {p['title']!r} has no query"
        refs = [t["refId"] for t in p["targets"]] if all("refId" in t for t in p["targets"]) \
            else []
        assert len(refs) == len(set(refs))
        for t in p["targets"]:
            assert t["datasource"] == p["datasource"]
            used = referenced_variables(t["expr"])
            assert used <= declared, f"{p['title']}: undefined variables {used - declared}"
        gp = p["gridPos"]
        assert gp["x"] + gp["w"] <= 24
    for v in variables(dash):
        if v["type"] == "query":
            assert v["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            parse_label_values(variable_query(v))
            assert referenced_variables(variable_query(v)) <= declared


def test_every_query_selects_declared_metrics() -> None:
    exported = exported_names() | {"up"}
    for path in DASHBOARDS:
        for q in queries(path):
            names = metric_names(q.expr)
            assert names, f"{q.dashboard} / {q.panel}: no metric in {q.expr}"
            assert names <= exported, f"{q.dashboard} / {q.panel}: unknown {names - exported}"
    for rule in alert_rules():
        names = metric_names(rule["expr"])
        assert names and names <= exported, f"{rule['alert']}: {names - exported}"


def test_every_declared_metric_is_documented() -> None:
    doc = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    for family in metrics.registry.collect():
        if family.name.startswith("depeg_"):
            name = family.name + ("_total" if family.type == "counter" else "")
            assert f"`{name}`" in doc, f"{name} missing from docs/metrics.md"


def test_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    """promtool parses every dashboard query (as a recording rule) offline."""
    promtool = tool("promtool")
    rules = []
    for path in DASHBOARDS:
        dash = load(path)
        dummy = {v["name"]: "x" for v in variables(dash)}
        for i, q in enumerate(queries(path)):
            expr = substitute(q.expr, dummy)
            rules.append({"record": f"dashboard:{path.stem}:{i}", "expr": expr})
    rules_file = tmp_path / "dashboard-rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    result = run(promtool, "check", "rules", rules_file)
    assert result.returncode == 0, result.stdout + result.stderr


# ---- Prometheus ---------------------------------------------------------------------------
def test_alert_rules_pass_promtool() -> None:
    result = run(tool("promtool"), "check", "rules", ALERTS)
    assert result.returncode == 0, result.stdout + result.stderr
    names = {r["alert"] for r in alert_rules()}
    for required in ("DepegConsumerLagGrowing", "DepegNoTicks", "DepegStaleTokens",
                     "DepegTierChangeToCritical", "DepegDeliveryFailureRatio",
                     "DepegDeliveryRetryBacklog", "DepegProcessDown"):
        assert required in names
    for rule in alert_rules():
        assert rule["labels"]["severity"] in {"critical", "warning"}
        assert rule["annotations"]["summary"]


def test_alert_rules_fire_on_unit_series() -> None:
    unit_tests = REPO / "tests" / "ops" / "alerts_test.yml"
    result = run(tool("promtool"), "test", "rules", unit_tests)
    assert result.returncode == 0, result.stdout + result.stderr
    # Every alert has a unit test in which it fires.
    fired = {case["alertname"] for test in yaml.safe_load(unit_tests.read_text())["tests"]
             for case in test["alert_rule_test"] if case["exp_alerts"]}
    assert {r["alert"] for r in alert_rules()} <= fired


def test_prometheus_configs_pass_promtool(tmp_path: Path) -> None:
    promtool = tool("promtool")
    result = run(promtool, "check", "config", DEPLOY / "prometheus" / "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    # The Kubernetes variant lives inside a ConfigMap: check it the same way.
    cm = yaml.safe_load((DEPLOY / "k8s" / "prometheus-config.yaml").read_text())
    config = yaml.safe_load(cm["data"]["prometheus.yml"])
    shutil.copy(ALERTS, tmp_path / "alerts.yml")
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    result = run(promtool, "check", "config", tmp_path / "prometheus.yml")
    if "field kubernetes_sd_configs not found" in result.stdout + result.stderr:
        # Debian builds Prometheus without Kubernetes discovery: check everything else
        # (relabel rules, rule files) with the discovery swapped for a static target.
        for job in config["scrape_configs"]:
            assert job.pop("kubernetes_sd_configs")[0]["role"] == "pod"
            job["static_configs"] = [{"targets": ["10.0.0.1:9108"]}]
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        result = run(promtool, "check", "config", tmp_path / "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr


# ---- deployment files -----------------------------------------------------------------
def test_compose_file_matches_compose_spec(tmp_path: Path) -> None:
    check = tool("check-jsonschema")
    compose = DEPLOY / "docker-compose.yml"
    result = run(check, "--builtin-schema", "vendor.compose-spec", compose)
    assert result.returncode == 0, result.stdout + result.stderr
    # The validator can fail: a misspelt key is rejected.
    broken = tmp_path / "compose.yml"
    broken.write_text(compose.read_text().replace("healthcheck:", "helthcheck:", 1))
    assert run(check, "--builtin-schema", "vendor.compose-spec", broken).returncode != 0
    doc = yaml.safe_load(compose.read_text())
    services = doc["services"]
    for name in ("kafka", "postgres", "monitor", "deliver", "store", "api", "prometheus",
                 "grafana"):
        assert name in services
    assert "controller" in services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"]  # KRaft
    for mount in services["grafana"]["volumes"] + services["prometheus"]["volumes"]:
        source = mount.split(":")[0]
        if source.startswith("."):
            assert (DEPLOY / source).exists(), mount


def k8s_manifests() -> list[Path]:
    return sorted(p for p in (DEPLOY / "k8s").glob("*.yaml") if p.name != "kustomization.yaml")


def test_kubernetes_manifests_match_schemas(tmp_path: Path) -> None:
    validate = tool("kubernetes-validate")
    result = run(validate, "--strict", "--quiet", *k8s_manifests())
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text((DEPLOY / "k8s" / "api.yaml").read_text().replace(
        "containerPort:", "containerPorts:", 1))
    assert run(validate, "--strict", "--quiet", broken).returncode != 0


def test_kubernetes_deployments_are_operable() -> None:
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    assert set(kustomization["resources"]) == {p.name for p in k8s_manifests()}
    docs = [d for p in k8s_manifests() for d in yaml.safe_load_all(p.read_text()) if d]
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    assert {d["metadata"]["name"] for d in deployments} == {
        "depeg-monitor", "depeg-spread", "depeg-deliver", "depeg-store", "depeg-api"}
    for d in deployments:
        name = d["metadata"]["name"]
        assert ("PodDisruptionBudget", name) in kinds
        [c] = d["spec"]["template"]["spec"]["containers"]
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert c["resources"]["requests"] and c["resources"]["limits"]
        assert any(e.get("secretRef") for e in c["envFrom"])
        assert d["spec"]["template"]["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert ("Service", "depeg-api") in kinds and ("ConfigMap", "depeg-monitor-config") in kinds
    # The monitor never scales past the ticks topic's partitions.
    config = yaml.safe_load((DEPLOY / "k8s" / "configmap.yaml").read_text())["data"]["config.toml"]
    partitions = int(re.search(r"partitions = (\d+)", config).group(1))  # type: ignore[union-attr]
    hpa = next(d for d in docs if d["kind"] == "HorizontalPodAutoscaler")
    assert hpa["spec"]["maxReplicas"] <= partitions


def test_kubernetes_config_is_a_valid_service_config() -> None:
    import tomllib

    import msgspec

    from monitor.config import Config

    config = yaml.safe_load((DEPLOY / "k8s" / "configmap.yaml").read_text())["data"]["config.toml"]
    msgspec.convert(tomllib.loads(config), Config, strict=False)


def test_systemd_unit_verifies(tmp_path: Path) -> None:
    analyze = tool("systemd-analyze")
    unit = (DEPLOY / "systemd" / "depeg-monitor.service").read_text()
    exe = shutil.which("depeg-monitor") or str(VENV_BIN / "depeg-monitor")
    copy = tmp_path / "depeg-monitor.service"
    copy.write_text(unit.replace("/opt/depeg-monitor/bin/depeg-monitor", exe))
    result = run(analyze, "verify", copy)
    problems = [line for line in (result.stdout + result.stderr).splitlines()
                if "depeg-monitor.service" in line]
    assert not problems, "\n".join(problems)


def test_dockerfile_copies_existing_paths() -> None:
    text = (REPO / "Dockerfile").read_text()
    for line in text.splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            *sources, _dest = line.split()[1:]
            for source in sources:
                if not source.endswith("*"):
                    assert (REPO / source).exists(), line
    assert 'ENTRYPOINT ["depeg-monitor"]' in text and "USER 10001" in text


def _instructions(stage: str) -> str:
    """A Dockerfile stage without its comment lines."""
    return "\n".join(line for line in stage.splitlines() if not line.lstrip().startswith("#"))


def test_the_image_builds_the_compiled_engine_and_runs_it_without_a_compiler() -> None:
    """The mypyc build is made in the build stage, copied with the installed code and named
    in the runtime image; the compiler, mypy and pip installs stay in the build stage
    (docs/compiled.md "In the shipped deployments")."""
    text = (REPO / "Dockerfile").read_text()
    _, build, runtime = (_instructions(s) for s in re.split(r"^FROM .*$", text, flags=re.M))
    default = re.findall(r"^ARG COMPILED=(\S+)$", build + "\n" + runtime, re.M)
    assert len(default) == 2 and default[0] == default[1], default
    assert default[0].startswith("/opt/depeg-monitor/")  # inside what the runtime copies
    assert "gcc" in build and 'compile --out "$COMPILED"' in build
    assert "compile --status" in build  # loaded once, without mypy, or the image fails
    assert "COPY --from=build /opt/depeg-monitor /opt/depeg-monitor" in runtime
    assert "DEPEG_MONITOR_COMPILED=$COMPILED" in runtime
    assert not re.search(r"gcc|apt-get|mypy|pip install", runtime), runtime


def test_the_systemd_install_builds_what_the_unit_names() -> None:
    """docs/deploy.md's install (and upgrade) steps compile into the directory the unit's
    DEPEG_MONITOR_COMPILED names, and create the config file its DEPEG_CONFIG names."""
    unit = (DEPLOY / "systemd" / "depeg-monitor.service").read_text()
    doc = (REPO / "docs" / "deploy.md").read_text()
    named = re.findall(r"^Environment=DEPEG_MONITOR_COMPILED=(\S+)$", unit, re.M)
    assert len(named) == 1
    steps = f"/opt/depeg-monitor/bin/depeg-monitor compile --out {named[0]}"
    assert doc.count(steps) == 2 and steps.split("bin/")[1] in unit  # install and upgrade
    config = re.findall(r"^Environment=DEPEG_CONFIG=(\S+)$", unit, re.M)
    assert len(config) == 1 and re.search(rf"^install .* {re.escape(config[0])}$", doc, re.M)
