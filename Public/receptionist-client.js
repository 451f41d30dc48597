// receptionist-client.js: a browser client for the Receptionist gateway (docs/CLIENT.md).
//
// An ES module with no dependency and no build step:
//
//   import { ReceptionistClient } from '/receptionist-client.js';
//   const client = new ReceptionistClient();
//   const tiles = client.subscribeStore('tiles', { paths: ['color'], maxRate: 10 });
//   tiles.on('frame', () => render(tiles.models));
//
// One client holds one WebSocket (`/ws`, subprotocol `receptionist.v1`) shared by all of its
// subscriptions, at most one per store and one per topic (the protocol's rule for a connection).
// Over Server-Sent Events each subscription has an EventSource of its own. After any drop the
// client reconnects with exponential backoff and jitter and resumes every subscription with
// `since` and its `epoch`. Connection attempts and calls have deadlines (connectTimeoutMs,
// requestTimeoutMs). docs/PROTOCOL.md specifies the messages.
//
// Nothing is buffered: a subscription keeps its current state and version, and what the browser
// has not delivered yet stays in the browser's own socket buffers.
//
// The public entry point: the code lives in client/, one module per type or concern
// (ReceptionistClient in client/receptionist-client.js, the subscriptions beside it).

export { LIMITS } from './client/limits.js';
export { StoreSubscription } from './client/store-subscription.js';
export { TopicSubscription } from './client/topic-subscription.js';
export { ReceptionistClient, ReceptionistClient as default } from './client/receptionist-client.js';
