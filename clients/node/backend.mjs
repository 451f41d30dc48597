// A backend on Node 22 or later: follows a store and a topic with the same module the browser
// uses, and publishes. Lines in on standard input, events out as JSON lines:
//
//   node clients/node/backend.mjs http://127.0.0.1:8080 tiles news
//   publish {"headline":"hello"}     → {"event":"published","seq":1}
//   commit {"changes":[…],"ifVersion":3}  → {"event":"committed","version":4} (over the WebSocket)
//   rpc {"method":"echo","data":{…}} → {"event":"rpc","result":…} (the backend's RPC hook)
//   close                            → the process ends
//
// A line that is not JSON, or a malformed change set, is answered {"event":"refused","code":…}
// (SyntaxError, TypeError) and the backend goes on.
//
// RECEPTIONIST_TOKEN (a subscription token) is used when set (RECEPTIONIST_TOKEN_FN=1: through a
// function); RECEPTIONIST_WEBSOCKET=passed hands the WebSocket class in explicitly, as a runtime
// without a global one must.
import { createInterface } from 'node:readline';
import { ReceptionistClient } from '../../Public/receptionist-client.js';

const [url, store, topic] = process.argv.slice(2);
const out = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
const WebSocketClass = globalThis.WebSocket;
if (process.env.RECEPTIONIST_WEBSOCKET === 'passed') delete globalThis.WebSocket;
// RECEPTIONIST_TOKEN_FN=1 hands the token in as a function, asked again ahead of its expiry.
const askToken = () => {
  out({ event: 'token-asked' });
  return process.env.RECEPTIONIST_TOKEN;
};
const client = new ReceptionistClient({
  url,
  token: process.env.RECEPTIONIST_TOKEN_FN ? askToken : process.env.RECEPTIONIST_TOKEN || undefined,
  ...(process.env.RECEPTIONIST_WEBSOCKET === 'passed' ? { WebSocket: WebSocketClass } : {}),
});
client.on('error', (error) => out({ event: 'error', code: error.code }));

const tiles = client.subscribeStore(store);
tiles.on('snapshot', (e) => out({ event: 'snapshot', version: e.version, reset: e.reset, models: tiles.toJSON() }));
tiles.on('status', (e) => out({ event: 'store-status', status: e.status }));
// After each change set is applied whole (a 'change' event comes for each change within it).
tiles.on('frame', (frame) => {
  if (frame.type === 'changes') out({ event: 'change', version: tiles.version, models: tiles.toJSON() });
});

const news = client.subscribeTopic(topic);
news.on('status', (e) => { if (e.status === 'live') out({ event: 'live', topic }); });
news.on('message', (m) => out({ event: 'message', seq: m.seq, data: m.data }));

for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'close') break;
  if (line.startsWith('publish ')) {
    try {
      out({ event: 'published', seq: await client.publish(topic, JSON.parse(line.slice(8))) });
    } catch (error) {
      out({ event: 'refused', code: error.code ?? error.name });
    }
  } else if (line.startsWith('commit ')) {
    try {
      const { changes, ...conditions } = JSON.parse(line.slice(7)) ?? {};
      out({ event: 'committed', version: await client.commit(store, changes, conditions) });
    } catch (error) {
      out({ event: 'refused', code: error.code ?? error.name, version: error.version });
    }
  } else if (line.startsWith('rpc ')) {
    try {
      const { method, data } = JSON.parse(line.slice(4)) ?? {};
      out({ event: 'rpc', result: await client.rpc(method, data) });
    } catch (error) {
      out({ event: 'refused', code: error.code ?? error.name });
    }
  }
}
client.close();
process.exit(0); // standard input is still open: nothing else would end the process
