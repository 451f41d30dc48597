// Small helpers the client's modules share: own properties, UTF-8 lengths, the browser's state.

export const hasOwn = (object, key) => Object.prototype.hasOwnProperty.call(object, key);
export const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);
export const ownValue = (object, key) => (hasOwn(object, key) ? object[key] : undefined);

/** Sets `object[key]` as an own property, even for the key `__proto__`. */
export function setOwn(object, key, value) {
  if (key === '__proto__') {
    Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    object[key] = value;
  }
}

/** The UTF-8 length of a string, without encoding it. */
export function utf8Length(text) {
  let bytes = text.length;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) { bytes += 2; i += 1; } // a pair: 4 bytes
    else bytes += 2;
  }
  return bytes;
}

export function browserOffline() {
  return typeof navigator !== 'undefined' && navigator.onLine === false;
}

/** The deepest a value may sit in a message: the gateway's JSON reader refuses nesting past it. */
const MAX_JSON_DEPTH = 256;

/**
 * `message` as the JSON text to send, or `{ problem }` when the gateway could not read it: a
 * value JSON cannot hold (a BigInt, a cycle), nesting past the gateway's depth, or a lone UTF-16
 * surrogate, which is no Unicode text (JSON.stringify writes it as an escape the gateway refuses,
 * without the `ref` that would tie the refusal to its message).
 */
export function encodeMessage(message) {
  let text;
  try { text = JSON.stringify(message); } catch (error) { return { problem: `not JSON: ${error && error.message ? error.message : error}` }; }
  if (typeof text !== 'string') return { problem: 'not a JSON value' };
  let depth = 0;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (c === 0x22) { // a string: its escapes, and raw surrogates that should pair
      for (i += 1; i < text.length && text.charCodeAt(i) !== 0x22; i += 1) {
        const s = text.charCodeAt(i);
        if (s === 0x5c) {
          i += 1;
          if (text[i] === 'u' && /^d[89a-f]/i.test(text.slice(i + 1, i + 3))) return { problem: 'a string holds a lone surrogate, which is not Unicode text' };
          if (text[i] === 'u') i += 4;
        } else if (s >= 0xd800 && s <= 0xdbff && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
          i += 1;
        } else if (s >= 0xd800 && s <= 0xdfff) {
          return { problem: 'a string holds a lone surrogate, which is not Unicode text' };
        }
      }
    } else if (c === 0x7b || c === 0x5b) { // { or [: it sits at `depth`, what it holds one deeper
      depth += 1;
      const empty = text[i + 1] === '}' || text[i + 1] === ']';
      if (depth > MAX_JSON_DEPTH || (!empty && depth >= MAX_JSON_DEPTH)) return { problem: `nesting deeper than ${MAX_JSON_DEPTH} levels` };
    } else if (c === 0x7d || c === 0x5d) {
      depth -= 1;
    }
  }
  return { text };
}

/**
 * Whether `url` answers plain HTTP within `timeoutMs`: with a status below 500 (a proxy whose
 * gateway is down answers 502, 503 or 504: that is no answer), or, in a page, at all when the
 * gateway is of another origin and its answer to `/ws` carries no CORS headers to read the status
 * by (an opaque answer still is one). An address that is down, or a network that is, answers
 * nothing. Resolves with null where there is no `fetch` to ask with.
 */
export async function answersHttp(url, timeoutMs) {
  if (typeof fetch !== 'function') return null;
  const abort = typeof AbortController === 'function' ? new AbortController() : null;
  const timer = setTimeout(() => { if (abort) abort.abort(); }, timeoutMs);
  const ask = (mode) => fetch(url, { cache: 'no-store', mode, signal: abort ? abort.signal : undefined });
  try {
    try {
      return (await ask('cors')).status < 500;
    } catch {
      if (typeof location === 'undefined' || (abort && abort.signal.aborted)) return false;
      await ask('no-cors');
      return true;
    }
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
    if (abort) abort.abort(); // the status is all it takes
  }
}
