// The client library's heartbeat over SSE, under Node: each scenario prints one JSON line with
// what the client and its EventSources saw. Run by test_client_sse_heartbeat.py with
// --experimental-eventsource, against a gateway started with a short --sse-heartbeat.
// Usage: node node_client_sse_heartbeat.mjs SCENARIO [ARGS…]
import { ReceptionistClient } from '../../Public/receptionist-client.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const print = (value) => console.log(JSON.stringify(value));

/** Polls `condition` every 20 ms for at most `ms`; returns whether it held. */
async function until(condition, ms) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(20)) if (condition()) return true;
  return condition();
}

/** How many timers the process holds (the client's, and those of the scenario's own sleeps). */
const timersLeft = () => process.getActiveResourcesInfo().filter((name) => name === 'Timeout').length;

/**
 * Node's EventSource, recording each stream's URL and the `heartbeat` events it receives (when,
 * and their data), without changing what the client sees.
 */
function recordingEventSource(record) {
  return class extends globalThis.EventSource {
    constructor(url) {
      super(url);
      const stream = { url, heartbeats: [] };
      record.push(stream);
      this.addEventListener('heartbeat', (event) => stream.heartbeats.push({ at: Date.now(), data: event.data }));
    }
  };
}

/** What a subscription reports: its statuses (with their errors), frames, messages and errors. */
function watch(sub) {
  const seen = { statuses: [], frames: [], messages: [], errors: [] };
  sub.on('status', (event) => seen.statuses.push({ status: event.status, error: event.error, at: Date.now() }));
  sub.on('frame', (frame) => seen.frames.push(frame.type));
  sub.on('message', (message) => seen.messages.push([message.seq, message.data]));
  sub.on('error', (error) => seen.errors.push(error));
  return seen;
}

const options = (port, record, more) => ({ url: `http://127.0.0.1:${port}`, transport: 'sse', EventSource: recordingEventSource(record),
  connectTimeoutMs: 1000, backoffBaseMs: 100, backoffMaxMs: 400, ...more });

const scenarios = {
  // A live topic over SSE, then the gateway frozen (SIGSTOP) with the stream open: the client must
  // take the stream as lost; once the gateway runs again, every message published before and
  // after arrives exactly once, in order.
  async frozen(port, pid, topic, heartbeatMs, heartbeatTimeoutMs) {
    const record = [];
    const client = new ReceptionistClient(options(port, record, { heartbeatMs: Number(heartbeatMs), heartbeatTimeoutMs: Number(heartbeatTimeoutMs) }));
    const sub = client.subscribeTopic(topic);
    const seen = watch(sub);
    if (!(await until(() => sub.status === 'live', 5000))) throw new Error(`never live: ${sub.status}`);
    for (const n of [1, 2, 3]) await client.publish(topic, { n });
    const before = await until(() => seen.messages.length >= 3, 5000);
    const frozenAt = Date.now();
    process.kill(Number(pid), 'SIGSTOP');
    let left;
    try {
      const noticed = await until(() => sub.status !== 'live', 5000);
      left = { noticed, ms: Date.now() - frozenAt, status: sub.status, streams: record.length };
      await sleep(300); // an attempt to reconnect is under way, or due
    } finally {
      process.kill(Number(pid), 'SIGCONT');
    }
    // Published while the subscription is down or coming back, then once it is live again.
    for (const n of [4, 5]) await client.publish(topic, { n });
    const live = await until(() => sub.status === 'live', 10000);
    for (const n of [6, 7]) await client.publish(topic, { n });
    await until(() => seen.messages.length >= 7, 5000);
    await sleep(300); // a duplicate would come now
    client.close();
    print({ before, left, live, ...seen, urls: record.map((stream) => stream.url), frozenAt,
      heartbeats: record.map((stream) => stream.heartbeats.length), frameCount: sub.frames, timersAfter: timersLeft() });
  },

  // A topic and a store over SSE with the given heartbeatMs, idle for `idleMs`: the URLs, the
  // heartbeat events the streams received, and what reached the application meanwhile.
  async idle(port, topic, store, heartbeatMs, idleMs) {
    const record = [];
    const client = new ReceptionistClient(options(port, record, { heartbeatMs: Number(heartbeatMs), heartbeatTimeoutMs: 400 }));
    const topicSub = client.subscribeTopic(topic);
    const storeSub = client.subscribeStore(store);
    const topicSeen = watch(topicSub);
    const storeSeen = watch(storeSub);
    const live = await until(() => topicSub.status === 'live' && storeSub.status === 'live', 5000);
    const at = { frames: topicSub.frames + storeSub.frames, bytes: topicSub.bytes + storeSub.bytes };
    await sleep(Number(idleMs));
    const timers = timersLeft();
    const after = { frames: topicSub.frames + storeSub.frames, bytes: topicSub.bytes + storeSub.bytes, topic: topicSub.status, store: storeSub.status };
    client.close();
    print({ live, at, after, topic: topicSeen, store: storeSeen, streams: record, timersWhileIdle: timers, timersAfter: timersLeft() });
  },

  // Messages published every `everyMs` for `busyMs`: the gateway has no quiet interval, so sends
  // no heartbeat; the other events keep the stream alive.
  async busy(port, topic, heartbeatMs, heartbeatTimeoutMs, everyMs, busyMs) {
    const record = [];
    const client = new ReceptionistClient(options(port, record, { heartbeatMs: Number(heartbeatMs), heartbeatTimeoutMs: Number(heartbeatTimeoutMs) }));
    const sub = client.subscribeTopic(topic);
    const seen = watch(sub);
    if (!(await until(() => sub.status === 'live', 5000))) throw new Error(`never live: ${sub.status}`);
    const start = Date.now();
    const published = [];
    while (Date.now() - start < Number(busyMs)) {
      published.push({ at: Date.now(), seq: await client.publish(topic, { n: published.length + 1 }) });
      await sleep(Number(everyMs));
    }
    const end = Date.now();
    await until(() => seen.messages.length >= published.length, 5000);
    client.close();
    print({ start, end, published, ...seen, streams: record });
  },
};

const [name, ...args] = process.argv.slice(2);
await scenarios[name](...args);
process.exit(0);
