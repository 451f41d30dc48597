// Applying a store's changes to a local copy: applyChange, and pruneAbove after a removal.

import { hasOwn, isObject, ownValue, setOwn } from './helpers.js';

/**
 * Applies one change to `models` (a Map of model id to value), as docs/PROTOCOL.md says for a
 * (projected) copy: set the value at the path, creating the model and the objects on the way, or
 * remove it; after a removal under `paths`, drop the objects left empty above the listed path.
 * Returns the value the path held before (undefined when it held none).
 */
export function applyChange(models, change, listedPaths) {
  const id = change.model;
  const path = typeof change.path === 'string' ? change.path : '';
  const removes = change.kind === 'deleted' || change.value === undefined;
  if (path === '') {
    const previous = models.get(id);
    if (removes) models.delete(id);
    else models.set(id, change.value);
    return previous;
  }
  const keys = path.split('.');
  const last = keys[keys.length - 1];
  if (removes) {
    const root = models.get(id);
    if (!isObject(root)) return undefined;
    const chain = [root]; // chain[d]: the object at the path's first d keys
    let node = root;
    for (const key of keys.slice(0, -1)) {
      const next = ownValue(node, key);
      if (!isObject(next)) return undefined; // nothing there to remove
      chain.push(next);
      node = next;
    }
    const previous = ownValue(node, last);
    if (hasOwn(node, last)) delete node[last];
    if (listedPaths) pruneAbove(chain, keys, listedPaths);
    return previous;
  }
  let node = models.get(id);
  if (!isObject(node)) {
    node = {};
    models.set(id, node);
  }
  for (const key of keys.slice(0, -1)) {
    let next = ownValue(node, key);
    if (!isObject(next)) {
      next = {};
      setOwn(node, key, next);
    }
    node = next;
  }
  const previous = ownValue(node, last);
  setOwn(node, last, change.value);
  return previous;
}

/**
 * After a removal at `keys`: the objects strictly above the outermost listed path that covers
 * `keys` exist in a projection only to lead to it; drop those left empty, deepest first. The
 * model itself (depth 0) stays: it still exists in the store.
 */
function pruneAbove(chain, keys, listedPaths) {
  let depth = 0; // the length of the shortest listed path that is a prefix of `keys`
  for (const listed of listedPaths) {
    if (listed.length <= keys.length && listed.every((key, i) => key === keys[i])) {
      if (depth === 0 || listed.length < depth) depth = listed.length;
    }
  }
  for (let d = Math.min(depth - 1, chain.length - 1); d >= 1; d -= 1) {
    if (Object.keys(chain[d]).length > 0) break;
    delete chain[d - 1][keys[d - 1]];
  }
}
