// The gateway's own `unsubscribed` (the store was deleted) reaches the client while its own
// unsubscribe, and a new subscribe to the same store, wait for their answers (what the viewer does
// when its rate or prefix changes). The socket is a fake that hands the client frames in exactly
// that order, so the race is met every time. Prints one JSON line: what the new subscription
// got, and whether the client restarted its socket.
// Usage: node node_unsubscribe_race.mjs
import { ReceptionistClient } from '../../Public/receptionist-client.js';

const sockets = [];
class FakeSocket {
  constructor(url) {
    this.url = url;
    this.sent = [];
    this.closed = false;
    sockets.push(this);
    queueMicrotask(() => this.onopen?.());
  }
  send(text) { this.sent.push(JSON.parse(text)); }
  close() { this.closed = true; }
  receive(frame) { this.onmessage?.({ data: JSON.stringify(frame) }); }
}

const client = new ReceptionistClient({ url: 'http://gateway.test', transport: 'websocket', WebSocket: FakeSocket });
const first = client.subscribeStore('s', { maxRate: 5 });
await new Promise((resolve) => setTimeout(resolve, 10));
const socket = sockets[0];
socket.receive({ type: 'snapshot', store: 's', version: 3, epoch: 'e1', reset: false, models: { m: { v: 3 } } });
first.unsubscribe();
const second = client.subscribeStore('s', { maxRate: 10 });
const errors = [];
second.on('error', (error) => errors.push(error.code));
// What the gateway sends: the deletion's notice (queued before the client's messages reached it),
// the answer to the unsubscribe, then the answer to the new subscribe.
socket.receive({ type: 'unsubscribed', store: 's', reason: 'deleted' });
socket.receive({ type: 'error', code: 'not_subscribed', message: 'not subscribed to store s' });
socket.receive({ type: 'snapshot', store: 's', version: 1, epoch: 'e2', reset: false, models: { n: { v: 1 } } });
await new Promise((resolve) => setTimeout(resolve, 10));
console.log(JSON.stringify({
  sent: socket.sent.map((m) => m.type), status: second.status, models: Object.fromEntries(second.models),
  errors, sockets: sockets.length, closed: socket.closed,
}));
client.close();
process.exit(0);
