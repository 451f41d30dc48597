// The gateway's HTTP API, as the page calls it (with the page's token, when it has one).

import { token } from './page.js';

export async function api(method, path, body) {
  const init = { method, headers: {} };
  // A page given a token (`?token=`) writes with it: its `write` claim lets the gateway take a
  // paint without the API key.
  if (token) init.headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let payload = null;
  try { payload = text ? JSON.parse(text) : null; } catch { payload = null; }
  if (!response.ok) {
    const detail = payload && (payload.detail || payload.error);
    throw new Error(`${response.status} ${detail || response.statusText}`);
  }
  return payload;
}

export const storePath = (store) => `/api/stores/${encodeURIComponent(store)}`;
