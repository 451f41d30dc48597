"""GET /metrics: the Prometheus text format, parsed by the reference Python client's parser, and
counters that move as the test drives traffic."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from conftest import http_client_request, json_ok, wait_for
from test_trust import request
from wsclient import connect, publish, recv_json, send_json, subscribe, unique


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    resp = http_client_request(port, "GET", "/metrics")
    assert resp.status == 200
    assert resp.header("Content-Type").startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(resp.body.decode("utf-8")):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name, **labels) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_metrics_parse_and_name_every_family(start_server):
    server = start_server("--demo")
    samples = scrape(server.port)
    names = {name for name, _ in samples}
    for expected in ["receptionist_connections", "receptionist_subscriptions", "receptionist_messages_in_total",
                     "receptionist_messages_out_total", "receptionist_bytes_in_total", "receptionist_bytes_out_total",
                     "receptionist_deliveries_total", "receptionist_conflated_change_sets_total",
                     "receptionist_refusals_total", "receptionist_resumes_total", "receptionist_gaps_total",
                     "receptionist_resets_total", "receptionist_jobs", "receptionist_mailbox_depth",
                     "receptionist_loop_lag_seconds_bucket", "receptionist_loop_lag_seconds_count",
                     "receptionist_build_info"]:
        assert expected in names, expected
    assert value(samples, "receptionist_jobs", state="running") == 1
    assert value(samples, "receptionist_stores") == 1
    assert value(samples, "receptionist_connections", transport="http") == 1, "the scrape's own connection"
    # The lag probe runs every 100 ms from the start.
    wait_for(lambda: value(scrape(server.port), "receptionist_loop_lag_seconds_count") >= 3, 5.0, "no loop lag samples")


def test_counters_move_with_traffic(start_server):
    server = start_server("--max-subscriptions", "1", "--history", "2")
    topic = unique("metrics")
    before = scrape(server.port)
    with connect(server.port) as ws, connect(server.port) as other:
        assert subscribe(ws, topic=topic)["type"] == "subscribed"
        error = subscribe(ws, topic=topic + "-2")
        assert error["code"] == "too_many_subscriptions"
        for n in range(5):
            publish(server.port, topic, {"n": n})
        for _ in range(5):
            assert recv_json(ws)["type"] == "message"
        # A resume from 0 with only two messages kept reports a gap.
        send_json(other, {"type": "subscribe", "topic": topic, "since": 0})
        assert recv_json(other)["type"] == "subscribed"
        assert recv_json(other)["type"] == "gap"
        during = scrape(server.port)
        assert value(during, "receptionist_connections", transport="websocket") == 2
        assert value(during, "receptionist_subscriptions", kind="topic") == 2
    after = scrape(server.port)

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("receptionist_topic_publishes_total") == 5
    assert moved("receptionist_deliveries_total") >= 5
    assert moved("receptionist_messages_in_total", transport="websocket") == 3
    assert moved("receptionist_messages_out_total", transport="websocket") >= 9
    assert moved("receptionist_refusals_total", reason="subscriptions_per_connection") == 1
    assert moved("receptionist_resumes_total", kind="topic") == 1
    assert moved("receptionist_gaps_total") == 1
    assert moved("receptionist_http_requests_total") >= 6
    assert moved("receptionist_bytes_in_total") > 0 and moved("receptionist_bytes_out_total") > 0
    wait_for(lambda: value(scrape(server.port), "receptionist_connections", transport="websocket") == 0,
             5.0, "closed WebSockets still counted")
    # A closed connection takes its subscriptions with it (a subscription does not keep its sink
    # alive): none is left, and a publish after the close reaches no one and is answered.
    assert value(scrape(server.port), "receptionist_subscriptions", kind="topic") == 0
    publish(server.port, topic, {"n": "after"})
    assert value(scrape(server.port), "receptionist_topic_publishes_total") == value(before, "receptionist_topic_publishes_total") + 6


def test_refused_api_keys_are_counted(start_server):
    server = start_server("--api-key", "k")
    before = value(scrape(server.port), "receptionist_refusals_total", reason="api_key")
    assert request(server.port, "POST", "/api/topics/t/messages", {}).status == 401
    assert value(scrape(server.port), "receptionist_refusals_total", reason="api_key") == before + 1
    json_ok(request(server.port, "POST", "/api/topics/t/messages", {}, {"Authorization": "Bearer k"}), 201)


def test_json_log_format_writes_one_object_per_line(start_server):
    import json
    import signal

    server = start_server("--log-format", "json", "--log-level", "debug")
    assert http_client_request(server.port, "GET", "/healthz").status == 200
    server.send_signal(signal.SIGTERM)
    assert server.wait_exit(15) == 0
    lines = server.stderr_text().splitlines()
    assert len(lines) >= 3, lines
    records = [json.loads(line) for line in lines]
    for record in records:
        assert {"ts", "level", "label", "message", "source"} <= record.keys(), record
        assert record["ts"].endswith("Z") and "T" in record["ts"]
    messages = [record["message"] for record in records]
    assert "started" in messages and "draining" in messages and "stopped" in messages, messages
    assert any(r["message"].startswith("GET /healthz 200") and r["level"] == "debug" for r in records), records


def test_store_receptionists_count_distinct_options_and_go_with_their_members(start_server):
    server = start_server("--demo")
    assert value(scrape(server.port), "receptionist_store_receptionists") == 0
    with connect(server.port) as plain:
        # The store's first subscriber brings its feed and the receptionist without options.
        assert subscribe(plain, store="tiles")["type"] == "snapshot"
        assert value(scrape(server.port), "receptionist_store_receptionists") == 1
        with connect(server.port) as a, connect(server.port) as b, connect(server.port) as c:
            assert subscribe(a, store="tiles", paths=["color"], maxRate=5)["type"] == "snapshot"
            # The same options in another order share a receptionist; other options get their own.
            assert subscribe(b, store="tiles", maxRate=5, paths=["color"])["type"] == "snapshot"
            assert subscribe(c, store="tiles", models=["tile-1*"])["type"] == "snapshot"
            assert value(scrape(server.port), "receptionist_store_receptionists") == 3
        # The filtered ones go with their last member; the unfiltered one stays with the feed.
        wait_for(lambda: value(scrape(server.port), "receptionist_store_receptionists") == 1, 5.0,
                 "the receptionists of closed subscriptions were not released")
