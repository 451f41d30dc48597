// An example page script in TypeScript, written against Public/receptionist-client.d.ts the way
// docs/CLIENT.md uses the client. Tests/e2e/test_typescript.py type-checks it with
// `tsc -p Tests/typescript/tsconfig.json` (strict, no emit); it is never run.
//
// The lines after each `// @ts-expect-error` MUST fail to type-check: tsc reports an unused
// directive otherwise, and the test also removes the directives and checks that tsc then names
// exactly those lines. They prove that the declarations are strict, not `any`.

import * as receptionist from '../../Public/receptionist-client.js';
import DefaultClient, {
  LIMITS,
  ReceptionistClient,
  StoreSubscription,
  TopicSubscription,
} from '../../Public/receptionist-client.js';
import type {
  AnySubscription,
  ChangeEvent,
  ClientStatus,
  CommitError,
  JSONObject,
  JSONValue,
  PresenceMember,
  PublishError,
  SavedStore,
  StoreFrameEvent,
  Subscription,
  SubscriptionStatus,
  TokenProvider,
} from '../../Public/receptionist-client.js';

// ---- Compile-time checks that a type is what it should be (and not `any`) ----------------------

type IsAny<T> = 0 extends 1 & T ? true : false;
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false;
function expectType<T extends true>(): void {}

// ---- The client ---------------------------------------------------------------------------------

// A token from the page's own server, asked before every connection and ahead of its expiry.
const token: TokenProvider = async () => {
  const response = await fetch('/my-app/receptionist-token');
  return response.ok ? response.text() : null;
};

const client = new ReceptionistClient({
  url: location.origin,
  token,
  tokenIn: 'message',
  transport: 'auto',
  fallbackAfter: 3,
  backoffBaseMs: 500,
  backoffMaxMs: 15000,
});
const sameClass: typeof ReceptionistClient = DefaultClient; // the default export is the class

const statusLine = document.getElementById('status')!;
client.on('status', ({ status, retryAt, code }) => {
  statusLine.textContent = retryAt === null ? status : `${status} (in ${Math.round((retryAt - Date.now()) / 1000)} s, code ${code})`;
});
client.on('close', ({ code, reason }) => console.info(`WebSocket closed: ${code} ${reason}`));
client.on('draining', ({ reconnectAfterMs }) => console.info(`gateway draining, back in ${reconnectAfterMs} ms`));
client.on('transport', ({ transport }) => console.info(`moved to ${transport}`));
client.once('authenticated', ({ expiresAt }) => console.info(`token valid until ${new Date(expiresAt * 1000).toISOString()}`));
const stopErrors = client.on('error', ({ code, message, subscription }) => {
  console.warn(`${code}: ${message}`, subscription ? `(${subscription.kind} ${subscription.name})` : '');
});

// ---- A store: the tiles page of docs/CLIENT.md, kept across reloads ------------------------------

const key = 'tiles-copy';
const kept = JSON.parse(localStorage.getItem(key) ?? 'null') as SavedStore | null;
const tiles = client.subscribeStore('tiles', { paths: ['color'], maxRate: 10, presence: true, ...(kept ?? {}) });
addEventListener('pagehide', () => localStorage.setItem(key, JSON.stringify(tiles.saved())));

const grid = document.getElementById('grid')!;
const cells = new Map<string, HTMLElement>(); // model id -> its square
const byNumber = new Intl.Collator(undefined, { numeric: true }).compare;

function paint(id: string): void {
  const model = tiles.get(id);
  let cell = cells.get(id);
  if (model === undefined) { // deleted
    if (cell) cell.remove();
    cells.delete(id);
    return;
  }
  if (!cell) {
    cell = document.createElement('span');
    cell.dataset.model = id;
    cell.title = id;
    cells.set(id, cell);
  }
  cell.style.backgroundColor = typeof model.color === 'string' ? model.color : '';
}

function order(): void {
  grid.replaceChildren(...[...cells.keys()].sort(byNumber).map((id) => cells.get(id)!));
}

// A snapshot replaces everything: the first one, and a reset after a reconnection.
tiles.on('snapshot', ({ version, epoch, reset, models }) => {
  console.info(`snapshot at ${version} (epoch ${epoch ?? '?'}${reset ? ', a reset' : ''}): ${models.size} models`);
  for (const cell of cells.values()) cell.remove();
  cells.clear();
  for (const id of tiles.models.keys()) paint(id);
  order();
});
tiles.on('change', ({ model, path, kind, value, old }) => {
  const created = !cells.has(model);
  if (kind === 'deleted' && path === '') console.info(`model ${model} deleted; it was`, old);
  else if (value !== null) console.debug(model, path, value);
  paint(model);
  if (created) order();
});
tiles.on('frame', (frame) => {
  document.getElementById('version')!.textContent = String(tiles.version);
  if (frame.type !== 'changes') return;
  const ms = Date.now() - frame.firstCommittedAt / 1000;
  const span = frame.from === undefined ? '' : ` (versions ${frame.from + 1} to ${frame.version})`;
  document.getElementById('staleness')!.textContent = `${Math.max(0, Math.round(ms))} ms old${span}`;
});
tiles.on('resumed', ({ version, resumed }) => console.info(`resumed at ${version}: ${resumed}`));
tiles.on('status', function ({ status, retryAt, error, transport }) {
  // `this` is the subscription.
  console.info(`${this.name}: ${status} over ${transport}`, retryAt, error?.code);
});
tiles.on('error', ({ code, message }) => console.warn(`tiles refused: ${code} ${message}`));

const state: Record<string, JSONObject> = tiles.toJSON();
const copyText: string = JSON.stringify(tiles); // toJSON gives {id: value}
const saved = tiles.saved();
if (saved !== null) {
  const since: number = saved.since;
  const epoch: string | undefined = saved.epoch;
  const models: Record<string, unknown> = saved.state;
  // The same store from another client, resumed from what was kept, with other options.
  const second = new ReceptionistClient({ transport: 'sse' });
  const resumed = second.subscribeStore('tiles', { models: ['tile-1*'], old: true, ...saved });
  resumed.unsubscribe();
  second.close();
  console.debug(since, epoch, models);
}
console.debug(state, copyText, tiles.options.maxRate, tiles.frames, tiles.bytes, tiles.presence.clients);

// ---- A topic: messages, from the start of the history ------------------------------------------

const news = client.subscribeTopic('news', { since: 0 });
news.on('message', ({ seq, data, publishedAt }) => console.info(seq, data, new Date(publishedAt / 1000)));
news.on('gap', ({ from, to }) => console.warn(`messages ${from} to ${to} are lost`));
news.on('reset', ({ seq, previous }) => console.warn(`news started again at ${seq} (was ${previous ?? 'nothing'})`));
news.on('frame', (frame) => {
  if (frame.type === 'message') console.debug(`${frame.bytes} bytes, ${frame.receivedAt - frame.publishedAt / 1000} ms`);
});
const lastSeq: number | null = news.seq;
const topicEpoch: string | null = news.epoch;

// ---- Publishing ---------------------------------------------------------------------------------

async function announce(headline: string, orderId: string): Promise<number | null> {
  try {
    const first: number = await client.publish('news', { headline });
    const again = await client.publish('news', { headline, order: orderId, tags: ['a', 1, true, null] }, { idempotencyKey: `order-${orderId}` });
    return Math.max(first, again);
  } catch (caught) {
    const error = caught as PublishError;
    if (error.code === 'too_many_requests' || error.status === 429) return null;
    if (error.code === 'forbidden') console.warn(`no publish claim for news: ${error.message}`);
    throw error;
  }
}
void announce('hello', '17');
client.publish('news', 'plain text').catch((error: PublishError) => console.warn(error.code, error.status));

// ---- Calling the backend -------------------------------------------------------------------------

async function profile(id: number): Promise<string | null> {
  const answer = await client.rpc('getProfile', { id });
  return typeof answer === 'object' && answer !== null && !Array.isArray(answer) && typeof answer.name === 'string' ? answer.name : null;
}
void profile(7);
// @ts-expect-error: the method is a string
void client.rpc(7);

// ---- Limits ------------------------------------------------------------------------------------

const fastest: number = LIMITS.maxRate;
void client.subscribeStore('tiles', { maxRate: Math.min(fastest, 30), models: ['a'].slice(0, LIMITS.maxModels) });
// @ts-expect-error: the limits are read-only
LIMITS.maxRate = 5;

// ---- Committing ---------------------------------------------------------------------------------

async function paintTile(tile: string, color: string, seen: number): Promise<number | null> {
  try {
    return await client.commit('tiles', [{ op: 'set', model: tile, path: 'color', value: color }], { ifVersion: seen });
  } catch (caught) {
    const error = caught as CommitError;
    if (error.code === 'precondition_failed') return error.version ?? null;
    throw error;
  }
}
void paintTile('tile-1', 'red', 3);
void client.commit('tiles', [{ op: 'put', model: 'a', value: { n: 1 } }, { op: 'delete', model: 'b' }], { ifMatch: { a: '"4"', b: 5 } });
// @ts-expect-error: a set names its path
void client.commit('tiles', [{ op: 'set', model: 'a', value: 1 }]);
// @ts-expect-error: ifVersion is a number
void client.commit('tiles', [{ op: 'delete', model: 'a' }], { ifVersion: '3' });

// ---- Presence -----------------------------------------------------------------------------------

function render(names: string[]): void {
  document.getElementById('members')!.textContent = names.join(', ');
}

const room = client.subscribeTopic('chat.room-7', { presence: true });
room.on('presence', ({ members, clients, users, countsOnly, joins, leaves, whole }) => {
  if (countsOnly) {
    render([`${clients} clients, ${users} users`]);
    return;
  }
  render([...members.values()].map((member) => (typeof member.info?.name === 'string' ? member.info.name : member.user)));
  console.debug(whole ? 'whole list' : `${joins.length} joined, ${leaves.map((leave) => leave.user).join(' ')} left`);
});
const here: PresenceMember | undefined = room.presence.members.get('5f0c9e1a7b3d2e44');

// ---- The client's members -----------------------------------------------------------------------

const clientStatus: ClientStatus = client.status;
const transportNow: 'websocket' | 'sse' = client.transport;
for (const sub of client.subscriptions) {
  const status: SubscriptionStatus = sub.status;
  if (sub.kind === 'store') console.debug(sub.name, status, sub.version, sub instanceof StoreSubscription);
  else console.debug(sub.name, status, sub.seq, sub instanceof TopicSubscription);
}
const anySub: AnySubscription = room;
const baseSub: Subscription<unknown> | null = null;
console.debug(receptionist.default === ReceptionistClient, sameClass, lastSeq, topicEpoch, here, clientStatus, transportNow, anySub, baseSub);
stopErrors();

// The types are real, not `any`.
expectType<Equal<ReturnType<typeof client.publish>, Promise<number>>>();
expectType<Equal<ReturnType<typeof tiles.saved>, SavedStore | null>>();
expectType<Equal<SavedStore, { since: number; epoch?: string; state: Record<string, unknown> }>>();
expectType<Equal<typeof tiles.version, number | null>>();
expectType<Equal<typeof client.status, ClientStatus>>();
expectType<Equal<Parameters<Parameters<typeof tiles.on<'change'>>[1]>[0], ChangeEvent>>();
expectType<Equal<Parameters<Parameters<typeof tiles.on<'frame'>>[1]>[0], StoreFrameEvent>>();
expectType<Equal<IsAny<typeof tiles.models>, false>>();
expectType<Equal<IsAny<JSONValue>, false>>();
expectType<Equal<PublishError['code'], string>>();
expectType<Equal<PublishError['status'], number>>();

// ---- Lines that must not type-check -------------------------------------------------------------

// @ts-expect-error: 'polling' is not a transport
new ReceptionistClient({ transport: 'polling' });
// @ts-expect-error: tokenIn is 'message' or 'query'
new ReceptionistClient({ tokenIn: 'header' });
// @ts-expect-error: maxRate is a number
client.subscribeStore('tiles-2', { maxRate: '10' });
// @ts-expect-error: models is a list of ids
client.subscribeStore('tiles-3', { models: 'tile-1' });
// @ts-expect-error: store options on a topic
client.subscribeTopic('news-2', { maxRate: 4 });
// @ts-expect-error: a store has no 'changes' event ('change' or 'frame')
tiles.on('changes', () => {});
// @ts-expect-error: 'message' is a topic's event, not the client's
client.on('message', () => {});
// @ts-expect-error: a change's model is an id, a string
tiles.on('change', ({ model }) => model.toFixed(0));
// @ts-expect-error: saved() is null before the first snapshot
const notYet: number = tiles.saved().since;
// @ts-expect-error: saved() is not a string for localStorage: JSON.stringify it
localStorage.setItem(key, tiles.saved());
// @ts-expect-error: `since` is a version number, not a saved() object
client.subscribeStore('tiles-4', { since: tiles.saved() });
// @ts-expect-error: the epoch is a string
client.subscribeStore('tiles-5', { since: 1200, epoch: 7, state: {} });
// @ts-expect-error: the version is read-only
tiles.version = 0;
// @ts-expect-error: publish resolves with a number
const seqText: Promise<string> = client.publish('news', {});
// @ts-expect-error: a function is not JSON
client.publish('news', () => 'hello');
// @ts-expect-error: the module does not export Subscription as a value (only its type)
console.debug(anySub instanceof receptionist.Subscription);
// @ts-expect-error: nor its event emitter
console.debug(receptionist.Emitter);
// @ts-expect-error: subscriptions are made by the client
new StoreSubscription();
