// Type declarations for receptionist-client.js, the browser client of the Receptionist gateway.
// docs/CLIENT.md documents the API; docs/PROTOCOL.md the messages behind it. Every name here is
// one that receptionist-client.js exports: Tests/e2e/test_typescript.py type-checks an example
// page against this file (Tests/typescript/example.ts).
//
// The declarations live in client/, each beside the module it describes; this file re-exports
// the names the module exports.

// Only the names exported below exist: what the module keeps private (its event emitter, the
// subscriptions' common base, the checks in client/options.js and client/errors.js) is not
// re-exported, and `Subscription` is exported as a type only, since the module does not export it
// as a value.
import { ReceptionistClient } from './client/receptionist-client.js';

export * from './client/json.js';
export * from './client/limits.js';
export {
  ChangeOperation, CommitOptions, PublishOptions, ReceptionistClientOptions, SavedStore, SavedTopic, StoreFilterOptions,
  StoreOptions, TokenIn, TokenProvider, TokenValue, TopicOptions, Transport, TransportOption,
} from './client/options.js';
export { CommitError, GatewayError, PublishError } from './client/errors.js';
export { Listener } from './client/emitter.js';
export {
  PresenceEvent, PresenceLeave, PresenceMember, PresenceState, SubscriptionStatus, SubscriptionStatusEvent,
} from './client/subscription.js';
export type { Subscription } from './client/subscription.js';
export * from './client/store-subscription.js';
export * from './client/topic-subscription.js';
export * from './client/receptionist-client.js';

export default ReceptionistClient;
