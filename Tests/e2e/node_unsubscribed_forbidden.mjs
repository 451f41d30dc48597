// The gateway ends a subscription that a new token no longer covers (`unsubscribed`, reason
// `forbidden`). The socket is a fake that hands the client that frame. Prints one JSON line: the
// error the subscription reported and its status.
// Usage: node node_unsubscribed_forbidden.mjs
import { ReceptionistClient } from '../../Public/receptionist-client.js';

const sockets = [];
class FakeSocket {
  constructor(url) {
    this.url = url;
    sockets.push(this);
    queueMicrotask(() => this.onopen?.());
  }
  send() {}
  close() {}
  receive(frame) { this.onmessage?.({ data: JSON.stringify(frame) }); }
}

const client = new ReceptionistClient({ url: 'http://gateway.test', transport: 'websocket', WebSocket: FakeSocket });
const subscription = client.subscribeStore('secret');
const errors = [];
subscription.on('error', (error) => errors.push(error.code));
await new Promise((resolve) => setTimeout(resolve, 10));
sockets[0].receive({ type: 'snapshot', store: 'secret', version: 3, epoch: 'e1', reset: false, models: { m: { v: 3 } } });
sockets[0].receive({ type: 'unsubscribed', store: 'secret', reason: 'forbidden' });
await new Promise((resolve) => setTimeout(resolve, 10));
console.log(JSON.stringify({ errors, status: subscription.status }));
client.close();
process.exit(0);
