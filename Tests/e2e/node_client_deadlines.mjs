// The client library's deadlines and connection attempts, under Node: each scenario prints one
// JSON line with what the client reported. Run by test_client_deadlines.py (with
// --experimental-eventsource, for the scenarios over SSE).
// Usage: node node_client_deadlines.mjs SCENARIO [ARGS…]
import net from 'node:net';
import http from 'node:http';
import { ReceptionistClient } from '../../Public/receptionist-client.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const print = (value) => console.log(JSON.stringify(value));

/** Polls `condition` every 20 ms for at most `ms`; returns whether it held. */
async function until(condition, ms) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(20)) if (condition()) return true;
  return condition();
}

/** How a promise settled, and after how many milliseconds. */
function track(promise) {
  const start = Date.now();
  const outcome = { settled: false };
  promise.then((value) => Object.assign(outcome, { settled: true, value, ms: Date.now() - start }),
    (error) => Object.assign(outcome, { settled: true, name: error.name, code: error.code ?? null, status: error.status ?? null,
      message: String(error.message), ms: Date.now() - start }));
  return outcome;
}

/** A TCP server that takes connections and never answers them. */
async function silentServer() {
  const sockets = new Set();
  const server = net.createServer((socket) => { sockets.add(socket); socket.on('error', () => {}); });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.stop = () => { for (const socket of sockets) socket.destroy(); server.close(); };
  return server;
}

/** A free port on 127.0.0.1 that nothing listens on (now). */
async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * The Node WebSocket, counting what the client sends by type (`sent.ping`, `sent.subscribe`, …)
 * and the pongs it receives, without changing either.
 */
function countingWebSocket(sent, received) {
  return class extends WebSocket {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (event) => {
        if (typeof event.data === 'string' && JSON.parse(event.data).type === 'pong') received.pong = (received.pong ?? 0) + 1;
      });
    }

    send(data) {
      const type = JSON.parse(data).type;
      sent[type] = (sent[type] ?? 0) + 1;
      super.send(data);
    }
  };
}

/** How many timers the process still holds (none should outlive a closed client). */
const timersLeft = () => process.getActiveResourcesInfo().filter((name) => name === 'Timeout').length;

/** An EventSource that only records that it was made. */
const madeSources = [];
class RecordingEventSource {
  constructor(url) { this.url = url; madeSources.push(url); }
  addEventListener() {}
  close() {}
}

const scenarios = {
  // A client with no subscription, whose WebSocket the gateway closes four times (a commit past
  // --max-message-bytes: 1009), each after a commit it answered: each reconnection waits a first
  // backoff step, since the connection worked in between.
  async 'backoff-reset-by-calls'(port, store) {
    const client = new ReceptionistClient({ url: `http://127.0.0.1:${port}`, transport: 'websocket', backoffBaseMs: 400, backoffMaxMs: 20000 });
    const delays = [];
    client.on('status', (event) => { if (event.status === 'reconnecting') delays.push(event.retryAt - Date.now()); });
    const versions = [];
    for (let n = 0; n < 4; n += 1) {
      versions.push(await client.commit(store, [{ op: 'put', model: 'm', value: { n } }]));
      const big = await client.commit(store, [{ op: 'put', model: 'big', value: { pad: 'x'.repeat(4096) } }]).catch((error) => error.code);
      if (big !== 'unavailable') throw new Error(`the oversized commit was answered ${big}`);
      if (!(await until(() => delays.length > n, 5000))) throw new Error(`no reconnection ${n}`);
    }
    print({ versions, delays });
    client.close();
  },

  // The gateway stops answering (SIGSTOP) with the socket open: commit, rpc and publish each
  // reject `unavailable` once requestTimeoutMs has passed.
  async 'frozen-gateway'(port, pid, store) {
    const client = new ReceptionistClient({ url: `http://127.0.0.1:${port}`, requestTimeoutMs: 1500 });
    const sub = client.subscribeStore(store);
    if (!(await until(() => sub.status === 'live', 5000))) throw new Error(`never live: ${sub.status}`);
    process.kill(Number(pid), 'SIGSTOP');
    let calls;
    try {
      calls = {
        commit: track(client.commit(store, [{ op: 'put', model: 'm', value: { n: 1 } }])),
        rpc: track(client.rpc('echo', { n: 1 })),
        publish: track(client.publish(`${store}-news`, { n: 1 })),
      };
      await until(() => Object.values(calls).every((call) => call.settled), 6000);
    } finally {
      process.kill(Number(pid), 'SIGCONT');
    }
    print({ calls, status: client.status });
    client.close();
  },

  // The gateway stops answering (SIGSTOP) with the socket open and the connection idle: the
  // heartbeat's ping gets no answer, the client takes the connection as lost (a close with code 0)
  // and reconnects; once the gateway runs again the subscription is live and gets a new change.
  async 'heartbeat-frozen'(port, pid, store) {
    const client = new ReceptionistClient({ url: `http://127.0.0.1:${port}`, transport: 'websocket', heartbeatMs: 500,
      heartbeatTimeoutMs: 500, connectTimeoutMs: 1000, backoffBaseMs: 100, backoffMaxMs: 400 });
    const closes = [];
    const statuses = [];
    client.on('close', (event) => closes.push({ ...event, at: Date.now() }));
    client.on('status', (event) => statuses.push(event.status));
    const sub = client.subscribeStore(store);
    const changes = [];
    sub.on('change', (change) => changes.push(change.value));
    if (!(await until(() => sub.status === 'live', 5000))) throw new Error(`never live: ${sub.status}`);
    const frozenAt = Date.now();
    process.kill(Number(pid), 'SIGSTOP');
    let left;
    try {
      await until(() => client.status !== 'open', 5000);
      left = { ms: Date.now() - frozenAt, client: client.status, sub: sub.status, closes: closes.map(({ code, reason }) => ({ code, reason })) };
      await sleep(300); // an attempt to reconnect is under way, or due
    } finally {
      process.kill(Number(pid), 'SIGCONT');
    }
    const live = await until(() => sub.status === 'live', 10000);
    const version = await client.commit(store, [{ op: 'put', model: 'm', value: { n: 7 } }]).catch((error) => String(error));
    await until(() => changes.some((value) => value?.n === 7), 5000);
    const after = { live, version, changes, client: client.status, heartbeatCloses: closes.filter((c) => /heartbeat/.test(c.reason)).length };
    client.close();
    print({ left, statuses, after, timers: timersLeft() });
  },

  // Changes arriving more often than heartbeatMs: the client sends no ping. Once they stop, it does
  // (the count is real).
  async 'heartbeat-busy'(port, store) {
    const sent = {};
    const client = new ReceptionistClient({ url: `http://127.0.0.1:${port}`, transport: 'websocket', heartbeatMs: 800,
      heartbeatTimeoutMs: 5000, WebSocket: countingWebSocket(sent, {}) });
    let closes = 0;
    client.on('close', () => { closes += 1; });
    const sub = client.subscribeStore(store);
    let frames = 0;
    sub.on('frame', () => { frames += 1; });
    if (!(await until(() => sub.status === 'live', 5000))) throw new Error(`never live: ${sub.status}`);
    const writer = new ReceptionistClient({ url: `http://127.0.0.1:${port}`, transport: 'websocket', heartbeatMs: 0 });
    const start = Date.now();
    for (let n = 1; Date.now() - start < 2500; n += 1) {
      await writer.commit(store, [{ op: 'put', model: 'm', value: { n } }]);
      await sleep(100);
    }
    writer.close();
    const busy = { ms: Date.now() - start, frames, pings: sent.ping ?? 0, subscribes: sent.subscribe ?? 0, closes };
    await until(() => (sent.ping ?? 0) >= 1, 3000);
    const idle = { pings: sent.ping ?? 0, closes, status: client.status };
    client.close();
    print({ busy, idle });
  },

  // A healthy connection with nothing to receive: the client pings every heartbeatMs, gets its
  // pongs, and stays open; the pongs disturb no answer it waits for (a subscription made after
  // them goes live). With heartbeatMs 0 it sends no ping at all.
  async 'heartbeat-idle'(port, store, heartbeatMs) {
    const sent = {};
    const received = {};
    const client = new ReceptionistClient({ url: `http://127.0.0.1:${port}`, transport: 'websocket',
      heartbeatMs: Number(heartbeatMs), heartbeatTimeoutMs: 1000, WebSocket: countingWebSocket(sent, received) });
    let closes = 0;
    client.on('close', () => { closes += 1; });
    const sub = client.subscribeStore(store);
    if (!(await until(() => sub.status === 'live', 5000))) throw new Error(`never live: ${sub.status}`);
    const start = Date.now();
    if (Number(heartbeatMs) > 0) await until(() => (sent.ping ?? 0) >= 4, 5000);
    else await sleep(1500);
    const ms = Date.now() - start;
    const topic = client.subscribeTopic(`${store}-after`);
    const topicLive = await until(() => topic.status === 'live', 3000);
    const outcome = { ms, pings: sent.ping ?? 0, pongs: received.pong ?? 0, closes, status: client.status, sub: sub.status, topicLive };
    client.close();
    print({ ...outcome, timers: timersLeft() });
  },

  // A server that takes the connection and never answers the upgrade (or the event stream's
  // request): each attempt fails after connectTimeoutMs and the backoff goes on.
  async 'silent-server'(transport) {
    const server = await silentServer();
    const client = new ReceptionistClient({ url: `http://127.0.0.1:${server.address().port}`, transport,
      connectTimeoutMs: 300, backoffBaseMs: 50, backoffMaxMs: 100 });
    const closes = [];
    const statuses = [];
    client.on('close', (event) => closes.push(event));
    const sub = client.subscribeStore('s');
    sub.on('status', (event) => statuses.push(event.status));
    await sleep(2000);
    print({ client: client.status, sub: sub.status, statuses, closes: closes.length, closeCodes: [...new Set(closes.map((c) => c.code))] });
    client.close();
    server.stop();
  },

  // commit() on a client with no subscription (it opens the WebSocket for it), and a commit made
  // right after subscribing (it waits for the socket to open).
  async 'calls-without-subscription'(port, store) {
    const client = new ReceptionistClient({ url: `http://127.0.0.1:${port}`, requestTimeoutMs: 5000 });
    const before = client.status;
    const first = track(client.commit(store, [{ op: 'put', model: 'a', value: { n: 1 } }]));
    await until(() => first.settled, 6000);
    const other = new ReceptionistClient({ url: `http://127.0.0.1:${port}`, requestTimeoutMs: 5000 });
    other.subscribeStore(store);
    const second = track(other.commit(store, [{ op: 'put', model: 'b', value: { n: 2 } }]));
    await until(() => second.settled, 6000);
    print({ before, first, second, status: client.status });
    client.close();
    other.close();
  },

  // A commit waiting for a WebSocket that never opens rejects `unavailable` at its deadline, with
  // nothing sent; one waiting when the client closes rejects then.
  async 'call-never-connected'() {
    const port = await freePort();
    const client = new ReceptionistClient({ url: `http://127.0.0.1:${port}`, transport: 'websocket', requestTimeoutMs: 800,
      backoffBaseMs: 100, backoffMaxMs: 200 });
    const late = track(client.rpc('m', 1));
    await until(() => late.settled, 3000);
    const closing = track(client.commit('s', [{ op: 'delete', model: 'a' }]));
    client.close();
    await until(() => closing.settled, 1000);
    print({ late, closing });
  },

  // Transport 'auto' with the gateway down at first (nothing listens), then up behind the same
  // address: the client connects over WebSocket. It falls back to SSE only when the upgrade is
  // refused while HTTP is answered (the second address: an HTTP server refusing upgrades).
  async 'auto-after-outage'(gatewayPort) {
    const port = await freePort();
    const client = new ReceptionistClient({ url: `http://127.0.0.1:${port}`, fallbackAfter: 2, backoffBaseMs: 50,
      backoffMaxMs: 100, EventSource: RecordingEventSource });
    let failures = 0;
    client.on('close', () => { failures += 1; });
    const sub = client.subscribeTopic('outage');
    await until(() => failures >= 5, 5000);
    const proxy = net.createServer((socket) => {
      const upstream = net.connect(Number(gatewayPort), '127.0.0.1');
      socket.pipe(upstream).pipe(socket);
      socket.on('error', () => upstream.destroy());
      upstream.on('error', () => socket.destroy());
    });
    await new Promise((resolve) => proxy.listen(port, '127.0.0.1', resolve));
    await until(() => sub.status === 'live', 5000);
    const afterOutage = { failures, transport: client.transport, status: sub.status, sources: madeSources.length };
    client.close();
    proxy.close();

    const refusing = http.createServer((request, response) => { response.writeHead(404); response.end('{}'); });
    refusing.on('upgrade', (request, socket) => { socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n'); });
    await new Promise((resolve) => refusing.listen(0, '127.0.0.1', resolve));
    const proxied = new ReceptionistClient({ url: `http://127.0.0.1:${refusing.address().port}`, fallbackAfter: 2,
      backoffBaseMs: 50, backoffMaxMs: 100, EventSource: RecordingEventSource });
    proxied.subscribeTopic('refused');
    await until(() => proxied.transport === 'sse', 5000);
    const refused = { transport: proxied.transport, sources: madeSources.length };
    proxied.close();
    refusing.close();
    print({ afterOutage, refused });
  },

  // A token function asked once for the connection that the subscriptions made at start share.
  async 'token-once'(port, ...stores) {
    let asked = 0;
    const token = async () => { asked += 1; await sleep(50); return null; };
    const client = new ReceptionistClient({ url: `http://127.0.0.1:${port}`, token });
    const subs = stores.map((store) => client.subscribeStore(store));
    subs.push(client.subscribeTopic('token-once'));
    await until(() => subs.every((sub) => sub.status === 'live'), 5000);
    print({ asked, statuses: subs.map((sub) => sub.status) });
    client.close();
  },

  // A client clock ten minutes ahead of the gateway's, tokens of a minute: each looks expired on
  // arrival, and renewal must not loop.
  async 'clock-ahead'(port, store, token) {
    const realNow = Date.now.bind(Date);
    Date.now = () => realNow() + 10 * 60 * 1000;
    let asked = 0;
    const client = new ReceptionistClient({ url: `http://127.0.0.1:${port}`, token: () => { asked += 1; return token; } });
    let authenticated = 0;
    client.on('authenticated', () => { authenticated += 1; });
    const sub = client.subscribeStore(store);
    await sleep(3000);
    print({ asked, authenticated, status: sub.status });
    client.close();
  },

  // Delays and counts the client cannot use throw a TypeError; good ones do not.
  async 'timing-options'() {
    const attempt = (options) => {
      try {
        new ReceptionistClient({ url: 'http://127.0.0.1:9', WebSocket: class {}, ...options }).close();
        return 'taken';
      } catch (error) {
        return `${error.name}: ${error.message}`;
      }
    };
    const bad = {};
    for (const name of ['backoffBaseMs', 'backoffMaxMs', 'connectTimeoutMs', 'requestTimeoutMs']) {
      for (const value of [NaN, null, 0, -100, '500', Infinity, 2 ** 31]) bad[`${name}=${String(value)}`] = attempt({ [name]: value });
    }
    for (const value of [0, -1, 1.5, NaN, null, '3']) bad[`fallbackAfter=${String(value)}`] = attempt({ fallbackAfter: value });
    for (const value of [NaN, null, -100, '500', Infinity, 2 ** 31, false]) bad[`heartbeatMs=${String(value)}`] = attempt({ heartbeatMs: value });
    for (const value of [NaN, null, 0, -100, '500', Infinity, 2 ** 31]) bad[`heartbeatTimeoutMs=${String(value)}`] = attempt({ heartbeatTimeoutMs: value });
    const good = [{ backoffBaseMs: 1, backoffMaxMs: 2 ** 31 - 1 }, { connectTimeoutMs: 250.5, requestTimeoutMs: 60000 },
      { fallbackAfter: 1 }, { fallbackAfter: Infinity }, {}, { heartbeatMs: 0 },
      { heartbeatMs: 1, heartbeatTimeoutMs: 2 ** 31 - 1 }].map(attempt);
    print({ bad, good });
  },
};

const [name, ...args] = process.argv.slice(2);
await scenarios[name](...args);
process.exit(0);
