"""`--history-bytes`: what a topic's or a store's history holds in memory is bounded in bytes as
well as in number (`--history`). Past it the oldest go, and a reader is told: a topic's resume
gets a `gap`, a read of the past `410` naming the oldest kept. Before, 400 messages of 1 MB to each
of three topics held 1.2 GB (the count limit alone), and a store twice that of its values.
"""

from __future__ import annotations

from conftest import api, json_ok
from history import assert_gone, read_messages, read_messages_raw
from wsclient import connect, recv_json, send_json, unique

BUDGET = 1024 * 1024
VALUE = "x" * (100 * 1024)  # about 100 KiB a message or value


def test_a_topic_keeps_at_most_its_bytes_and_a_resume_past_them_gets_a_gap(start_server):
    port = start_server("--history-bytes", str(BUDGET), "--publish-rate", "0").port
    topic = unique("heavy")
    for n in range(1, 41):
        assert json_ok(api(port, "POST", f"/api/topics/{topic}/messages", {"n": n, "pad": VALUE}), 201)["seq"] == n
    oldest = assert_gone(read_messages_raw(port, topic, "after=0&limit=100"))
    assert 29 <= oldest <= 32, oldest  # about ten messages of 100 KiB fit in 1 MiB; `oldest` may be read after
    kept = read_messages(port, topic, f"after={oldest}&limit=100")["messages"]
    assert [m["seq"] for m in kept] == list(range(oldest + 1, 41))
    assert sum(len(m["data"]["pad"]) for m in kept) <= BUDGET
    with connect(port) as ws:
        send_json(ws, {"type": "subscribe", "topic": topic, "since": 0})
        assert recv_json(ws)["resumed"] is True
        assert recv_json(ws) == {"type": "gap", "topic": topic, "from": 1, "to": oldest}
        assert [recv_json(ws)["seq"] for _ in kept] == list(range(oldest + 1, 41))


def test_a_store_keeps_at_most_its_bytes_of_change_sets(start_server):
    port = start_server("--history-bytes", str(BUDGET), "--publish-rate", "0").port
    store = unique("heavy")
    json_ok(api(port, "POST", "/api/stores", {"name": store}), 201)
    for n in range(1, 21):
        resp = api(port, "PUT", f"/api/stores/{store}/models/m", {"n": n, "pad": VALUE})
        assert json_ok(resp, resp.status)["version"] == n
    # Each change set holds the value before and after: about 200 KiB, so about five are kept.
    oldest = assert_gone(api(port, "GET", f"/api/stores/{store}/changes?after=0&limit=10"))
    assert 13 <= oldest <= 17, oldest
    changes = json_ok(api(port, "GET", f"/api/stores/{store}/changes?after={oldest}&limit=100"))["changes"]
    assert [c["version"] for c in changes] == list(range(oldest + 1, 21))
    with connect(port) as ws:
        send_json(ws, {"type": "subscribe", "store": store, "since": 1})
        snapshot = recv_json(ws)
        assert snapshot["type"] == "snapshot" and snapshot["reset"] is True and snapshot["version"] == 20, snapshot


def test_a_page_of_messages_holds_about_1_mib_and_says_where_the_next_starts(server):
    """A page was built whole on the loop, up to 1,000 messages of up to 1 MiB each, and held until
    read: four readers of 16 MiB pages slowed every subscriber (p99 0.14 to 31 ms)."""
    port, topic = server.port, unique("pages")
    text = "x" * 200_000
    for n in range(1, 13):
        json_ok(api(port, "POST", f"/api/topics/{topic}/messages", {"n": n, "text": text}), 201)
    after, seen, pages = 0, [], 0
    while True:
        page = json_ok(api(port, "GET", f"/api/topics/{topic}/messages?after={after}&limit=1000"))
        assert len(page["messages"]) <= 5, [m["seq"] for m in page["messages"]]
        if not page["messages"]:
            assert page["through"] == after
            break
        assert page["through"] == page["messages"][-1]["seq"]
        seen += [m["data"]["n"] for m in page["messages"]]
        after, pages = page["through"], pages + 1
    assert seen == list(range(1, 13)) and pages >= 3
    # A message larger than a page still comes, alone.
    json_ok(api(port, "POST", f"/api/topics/{topic}/messages", {"n": 13, "text": "y" * 1_040_000}), 201)
    page = json_ok(api(port, "GET", f"/api/topics/{topic}/messages?after=12"))
    assert [m["data"]["n"] for m in page["messages"]] == [13] and page["through"] == 13
