// Applying a store's changes to a local copy: applyChange, and pruneAbove after a removal.

import { hasOwn, isObject, ownValue, setOwn } from './helpers.js';

/**
 * Applies one change to `models` (a Map of model id to value), as docs/PROTOCOL.md says for a
 * (projected) copy: set the value at the path, creating the model and the objects on the way, or
 * remove it; after a removal under `paths`, drop the objects left empty above the listed path.
 * Returns the value the path held before (undefined when it held none).
 *
 * Nothing the copy held is changed in place: a change under a path replaces the model and each
 * object on the way with a changed copy (copy on write), so a value once given out (a model, a
 * change's value or old value, a snapshot's models) stays as it was given.
 */
export function applyChange(models, change, listedPaths) {
  const id = change.model;
  const path = typeof change.path === 'string' ? change.path : '';
  const removes = change.kind === 'deleted' || change.value === undefined;
  const root = models.get(id);
  if (path === '') {
    if (removes) models.delete(id);
    else models.set(id, change.value);
    return root;
  }
  const keys = path.split('.');
  const last = keys[keys.length - 1];
  if (removes) {
    if (!isObject(root)) return undefined;
    const chain = [{ ...root }]; // chain[d]: a copy of the object at the path's first d keys
    for (const key of keys.slice(0, -1)) {
      const next = ownValue(chain[chain.length - 1], key);
      if (!isObject(next)) return undefined; // nothing there to remove
      const copy = { ...next };
      setOwn(chain[chain.length - 1], key, copy);
      chain.push(copy);
    }
    const node = chain[chain.length - 1];
    const previous = ownValue(node, last);
    if (hasOwn(node, last)) delete node[last];
    if (listedPaths) pruneAbove(chain, keys, listedPaths);
    models.set(id, chain[0]);
    return previous;
  }
  const top = isObject(root) ? { ...root } : {};
  let node = top;
  for (const key of keys.slice(0, -1)) {
    const next = ownValue(node, key);
    const copy = isObject(next) ? { ...next } : {};
    setOwn(node, key, copy);
    node = copy;
  }
  const previous = ownValue(node, last);
  setOwn(node, last, change.value);
  models.set(id, top);
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
