// What the client library hands its listeners and what it sends, under Node: each scenario
// prints one JSON line. Some run on a fake socket that hands the client frames in a set order;
// the others against the gateway at the port given. Run by test_client_deadlines.py (with
// --experimental-eventsource, for the scenario over SSE).
// Usage: node node_client_events.mjs SCENARIO [ARGS…]
import { ReceptionistClient } from '../../Public/receptionist-client.js';
import { FakeSocket, sockets } from './node_fake_socket.mjs';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const print = (value) => console.log(JSON.stringify(value));
const copy = (value) => (value === undefined ? null : JSON.parse(JSON.stringify(value)));

async function until(condition, ms) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(20)) if (condition()) return true;
  return condition();
}

const fakeClient = () => new ReceptionistClient({ url: 'http://gateway.test', transport: 'websocket', WebSocket: FakeSocket });

async function commitOverHttp(port, store, changes) {
  const response = await fetch(`http://127.0.0.1:${port}/api/stores/${store}/changes`,
    { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ changes }) });
  if (!response.ok) throw new Error(`commit: ${response.status} ${await response.text()}`);
  return (await response.json()).version;
}

const scenarios = {
  // Listeners that throw: each is reported, and the other listeners and the stream go on.
  async 'listener-throws'() {
    const client = fakeClient();
    const sub = client.subscribeStore('s');
    const seen = [];
    sub.on('snapshot', () => { throw new Error('a snapshot listener failed'); });
    sub.on('snapshot', (event) => seen.push(`snapshot ${event.version}`));
    sub.on('change', () => { throw new Error('a change listener failed'); });
    sub.on('frame', (frame) => seen.push(`frame ${frame.version}`));
    await sleep(10);
    sockets[0].receive({ type: 'snapshot', store: 's', version: 1, epoch: 'e', reset: false, models: { m: { n: 1 } } });
    await sleep(10);
    sockets[0].receive({ type: 'changes', store: 's', version: 2, changes: [{ model: 'm', path: 'n', kind: 'updated', value: 2 }] });
    await sleep(50); // a rethrow in a timer would have ended the process by now
    print({ seen, status: sub.status, models: sub.toJSON() });
    client.close();
  },

  // What a listener was given stays as it was while later changes arrive: a change's value, a
  // snapshot's models, a model taken from `models`, what saved() gave.
  async 'given-values'(port, store) {
    const client = new ReceptionistClient({ url: `http://127.0.0.1:${port}` });
    const sub = client.subscribeStore(store);
    const snapshots = [];
    const changes = [];
    sub.on('snapshot', (event) => snapshots.push({ models: event.models, then: copy(Object.fromEntries(event.models)) }));
    sub.on('change', (change) => changes.push({ change, then: copy(change) }));
    if (!(await until(() => sub.status === 'live', 5000))) throw new Error(`never live: ${sub.status}`);
    const model = sub.get('m');
    const modelThen = copy(model);
    const saved = sub.saved();
    const savedThen = copy(saved);
    let version = await commitOverHttp(port, store, [{ op: 'set', model: 'm', path: 'a', value: { x: 1 } }]);
    version = await commitOverHttp(port, store, [{ op: 'set', model: 'm', path: 'a.x', value: 2 },
      { op: 'set', model: 'm', path: 'b', value: null }]);
    version = await commitOverHttp(port, store, [{ op: 'patch', model: 'm', value: { a: { y: 3 } } }]);
    await until(() => sub.version === version, 5000);
    const changed = (entries) => entries.filter((entry) => JSON.stringify(copy(entry.change ?? Object.fromEntries(entry.models))) !== JSON.stringify(entry.then));
    print({
      version: sub.version, models: sub.toJSON(), changes: changes.length,
      changedChanges: changed(changes).map((entry) => ({ then: entry.then, now: copy(entry.change) })),
      changedSnapshots: changed(snapshots).length,
      modelChanged: JSON.stringify(copy(model)) !== JSON.stringify(modelThen),
      savedChanged: JSON.stringify(copy(saved)) !== JSON.stringify(savedThen),
    });
    client.close();
  },

  // unsubscribe() from within a listener: nothing but the 'closed' status follows, not even for
  // the listeners after it on the same event.
  async 'unsubscribe-in-listener'() {
    const client = fakeClient();
    const watch = (sub, closeOn) => {
      const seen = [];
      sub.on(closeOn, () => sub.unsubscribe());
      for (const name of ['snapshot', 'change', 'frame', 'message', 'gap', 'reset', 'resumed', 'presence', 'status']) {
        sub.on(name, (event) => seen.push(name === 'status' ? `status ${event.status}` : name));
      }
      return seen;
    };
    const store = client.subscribeStore('s', { presence: true });
    const topic = client.subscribeTopic('t');
    const storeSeen = watch(store, 'snapshot');
    const topicSeen = watch(topic, 'message');
    await sleep(10);
    const socket = sockets[0];
    socket.receive({ type: 'snapshot', store: 's', version: 1, epoch: 'e', reset: false, models: { m: { n: 1 } } });
    socket.receive({ type: 'presence', store: 's', members: [], clients: 0, users: 0 });
    socket.receive({ type: 'subscribed', topic: 't', seq: 0, epoch: 'e', resumed: false });
    socket.receive({ type: 'message', topic: 't', seq: 1, data: 1, publishedAt: 1 });
    socket.receive({ type: 'message', topic: 't', seq: 2, data: 2, publishedAt: 2 });
    await sleep(10);
    print({ store: storeSeen, topic: topicSeen });
    client.close();
  },

  // Malformed change sets throw a TypeError, nothing sent; well-formed ones are sent.
  async 'malformed-changes'() {
    const client = fakeClient();
    client.subscribeStore('s');
    await sleep(10);
    const malformed = [
      [{ op: 'bogus', model: 'm' }], [null], ['put'], [{ op: 'set', model: 'm', value: 1 }],
      [{ op: 'set', model: 'm', path: 'a..b', value: 1 }], [{ op: 'set', model: 'm', path: 'a' }],
      [{ op: 'put', model: '', value: {} }], [{ op: 'put', model: 'm' }], [{ op: 'patch', model: 'm' }],
      [{ op: 'delete' }], [{ op: 'put', model: 'a/b', value: {} }], [{ op: 'put', model: '..', value: {} }],
      [{ op: 'put', model: 'x'.repeat(129), value: {} }], [{ op: 'put', model: 'ok', value: {} }, { op: 'put', value: {} }],
    ];
    const outcomes = malformed.map((changes) => {
      try {
        client.commit('s', changes).catch(() => {});
        return 'sent';
      } catch (error) {
        return error.name;
      }
    });
    const wellFormed = [[{ op: 'put', model: 'm', value: { n: 1 } }], [{ op: 'patch', model: 'm', value: { n: null } }],
      [{ op: 'set', model: 'm', path: 'style.border', value: null }], [{ op: 'delete', model: 'm' }]];
    for (const changes of wellFormed) client.commit('s', changes).catch(() => {});
    const commits = sockets[0].sent.filter((message) => message.type === 'commit').length;
    print({ outcomes, commits, wellFormed: wellFormed.length });
    client.close();
  },

  // A resume from a position of another life of the topic (its epoch given) is answered with a
  // reset, and the new life's messages are taken from its start.
  async 'topic-epoch'(port, topic, since, epoch) {
    const client = new ReceptionistClient({ url: `http://127.0.0.1:${port}` });
    let sub;
    try {
      sub = client.subscribeTopic(topic, { since: Number(since), epoch });
    } catch (error) {
      print({ threw: `${error.name}: ${error.message}` });
      client.close();
      return;
    }
    const resets = [];
    const messages = [];
    sub.on('reset', (event) => resets.push(event));
    sub.on('message', (message) => messages.push(message.data));
    await until(() => messages.length >= 6, 3000);
    await sleep(200);
    const sent = sub.epoch;
    print({ resets, messages, epoch: sent, seq: sub.seq });
    client.close();
  },

  // saved() keeps a topic's position; given back, only what came after it arrives.
  async 'topic-saved'(port, topic) {
    const first = new ReceptionistClient({ url: `http://127.0.0.1:${port}` });
    const sub = first.subscribeTopic(topic, { since: 0 });
    const before = typeof sub.saved === 'function' ? sub.saved() : 'no saved()';
    await until(() => sub.seq === 3, 5000);
    const saved = typeof sub.saved === 'function' ? sub.saved() : null;
    first.close();
    if (saved === null) {
      print({ before, saved });
      return;
    }
    const published = await fetch(`http://127.0.0.1:${port}/api/topics/${topic}/messages`,
      { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '"after"' });
    if (!published.ok) throw new Error(`publish: ${published.status}`);
    const second = new ReceptionistClient({ url: `http://127.0.0.1:${port}` });
    const resumed = second.subscribeTopic(topic, { ...saved });
    const messages = [];
    const resets = [];
    resumed.on('message', (message) => messages.push([message.seq, message.data]));
    resumed.on('reset', (event) => resets.push(event));
    await until(() => messages.length >= 1, 5000);
    await sleep(200);
    print({ before, saved, epoch: sub.epoch, messages, resets, json: JSON.parse(JSON.stringify(saved)) });
    second.close();
  },

  // Over SSE, a subscription whose URL is longer than the gateway reads (many long model ids)
  // fails with a clear error instead of being retried for good.
  async 'sse-long-url'(port, store) {
    let made = 0;
    const RealEventSource = globalThis.EventSource;
    class CountingEventSource extends RealEventSource {
      constructor(...args) { super(...args); made += 1; }
    }
    const client = new ReceptionistClient({ url: `http://127.0.0.1:${port}`, transport: 'sse', EventSource: CountingEventSource,
      backoffBaseMs: 50, backoffMaxMs: 100 });
    const models = Array.from({ length: 1024 }, (_, n) => `a-model-with-a-long-name-${String(n).padStart(4, '0')}`);
    const sub = client.subscribeStore(store, { models });
    const errors = [];
    sub.on('error', (error) => errors.push(error));
    await until(() => sub.status === 'failed', 3000);
    await sleep(300);
    print({ status: sub.status, errors, made });
    client.close();
  },
};

const [name, ...args] = process.argv.slice(2);
await scenarios[name](...args);
process.exit(0);
