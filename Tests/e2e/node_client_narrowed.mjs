// A store subscription the gateway narrowed (its subscribe hook allowed only `color`), asked for
// with no options: the snapshot names the filter, so a version it leaves out is not taken for a
// lost one. Before, the client resynced from the same version again and again, and applied
// nothing more. The socket is a fake that answers the subscribe with a narrowed snapshot at 10,
// then sends version 12 (11 touched only a hidden path).
// Prints one JSON line: the version held, the models, and how many subscribes were sent.
// Usage: node node_client_narrowed.mjs
import { ReceptionistClient } from '../../Public/receptionist-client.js';
import { FakeSocket, sockets } from './node_fake_socket.mjs';

class NarrowingGateway extends FakeSocket {
  send(text) {
    super.send(text);
    const message = this.sent[this.sent.length - 1];
    if (message.type !== 'subscribe') return;
    setTimeout(() => {
      this.receive({ type: 'snapshot', store: 's', version: 10, epoch: 'e1', reset: false, filter: { paths: ['color'] },
                     models: { a: { color: 'red' } } });
      this.receive({ type: 'changes', store: 's', version: 12, epoch: 'e1',
                     changes: [{ model: 'a', path: 'color', kind: 'updated', value: 'blue' }] });
    }, 0);
  }
}

const client = new ReceptionistClient({ url: 'http://gateway.test', transport: 'websocket', WebSocket: NarrowingGateway });
const sub = client.subscribeStore('s');
await new Promise((resolve) => setTimeout(resolve, 300));
const subscribes = sockets[0].sent.filter((message) => message.type === 'subscribe').length;
console.log(JSON.stringify({ version: sub.version, models: sub.toJSON(), subscribes }));
client.close();
process.exit(0);
