// An `error` that carries a `ref` answers a commit, never a subscribe: one whose commit no longer
// waits (the gateway answered it twice, say) reaches the client while a subscribe waits for its
// answer. The socket is a fake that hands the client frames in exactly that order. Prints one
// JSON line: what the subscription and the client reported.
// Usage: node node_client_stray_ref.mjs
import { ReceptionistClient } from '../../Public/receptionist-client.js';
import { FakeSocket, sockets } from './node_fake_socket.mjs';


const client = new ReceptionistClient({ url: 'http://gateway.test', transport: 'websocket', WebSocket: FakeSocket });
const clientErrors = [];
client.on('error', (error) => clientErrors.push(error.code));
const sub = client.subscribeStore('s');
const subErrors = [];
sub.on('error', (error) => subErrors.push(error.code));
await new Promise((resolve) => setTimeout(resolve, 10));
const socket = sockets[0];
socket.receive({ type: 'error', code: 'bad_message', message: 'a stray answer', ref: 'c9' });
socket.receive({ type: 'error', code: 'unavailable', message: 'a stray RPC answer', id: 'r9' });
socket.receive({ type: 'snapshot', store: 's', version: 1, epoch: 'e1', reset: false, models: { n: { v: 1 } } });
await new Promise((resolve) => setTimeout(resolve, 10));
console.log(JSON.stringify({
  status: sub.status, models: Object.fromEntries(sub.models), subErrors, clientErrors, sockets: sockets.length,
}));
client.close();
process.exit(0);
