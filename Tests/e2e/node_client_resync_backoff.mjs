// A gateway whose replay skips the same version every time: the client resumes at once the first
// time, then only after its backoff, which live frames that skip too do not put off. Before, it
// resubscribed thousands of times a second. The socket is a fake that answers each subscribe with
// a resume whose next frame skips version 2, and sends a live frame every 40 ms.
// Prints one JSON line: how many subscribes were sent in the first second, and the status.
// Usage: node node_client_resync_backoff.mjs
import { ReceptionistClient } from '../../Public/receptionist-client.js';
import { FakeSocket, sockets } from './node_fake_socket.mjs';

class SkippingGateway extends FakeSocket {
  send(text) {
    super.send(text);
    const message = this.sent[this.sent.length - 1];
    if (message.type === 'unsubscribe') {
      setTimeout(() => this.receive({ type: 'unsubscribed', store: 's' }), 0);
      return;
    }
    if (message.type !== 'subscribe') return;
    setTimeout(() => {
      if (message.since === undefined) {
        this.receive({ type: 'snapshot', store: 's', version: 1, epoch: 'e1', reset: false, models: { n: { v: 1 } } });
      } else {
        this.receive({ type: 'subscribed', store: 's', version: message.since, epoch: 'e1', resumed: true });
      }
      this.receive({ type: 'changes', store: 's', version: 3, epoch: 'e1', changes: [{ model: 'n', path: 'v', kind: 'updated', value: 3 }] });
    }, 0);
  }
}

const client = new ReceptionistClient({ url: 'http://gateway.test', transport: 'websocket', WebSocket: SkippingGateway });
const sub = client.subscribeStore('s');
// Live frames keep coming, each past a skipped version: they must not put the resume off.
let live = 4;
const ticker = setInterval(() => sockets[0].receive({
  type: 'changes', store: 's', version: live++, epoch: 'e1', changes: [{ model: 'n', path: 'v', kind: 'updated', value: live }],
}), 40);
await new Promise((resolve) => setTimeout(resolve, 1000));
clearInterval(ticker);
const subscribes = sockets[0].sent.filter((message) => message.type === 'subscribe').length;
console.log(JSON.stringify({ subscribes, version: sub.version, sockets: sockets.length }));
client.close();
process.exit(0);
