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
