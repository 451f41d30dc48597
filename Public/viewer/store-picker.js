// The store picker: the select (#store) listing the stores the gateway has, the one shown selected.

import { api } from './api.js';
import { collator } from './format.js';
import { ui } from './page.js';

/** The picker's list; `store()` names the store shown, which is always listed and selected. */
export function createStorePicker({ store }) {
  let names = [];
  async function refresh() {
    try {
      const payload = await api('GET', '/api/stores');
      names = (payload && Array.isArray(payload.stores) ? payload.stores : [])
        .map((entry) => entry && entry.name).filter((name) => typeof name === 'string');
    } catch {
      // The list is a convenience; the current store stays selectable without it.
    }
    render();
  }
  function render() {
    const all = [...new Set([...names, store()])].sort(collator.compare);
    const existing = [...ui.store.options].map((option) => option.value);
    if (existing.join('\u0000') !== all.join('\u0000')) {
      ui.store.replaceChildren(...all.map((name) => {
        const option = document.createElement('option');
        option.value = name;
        option.textContent = name;
        return option;
      }));
    }
    ui.store.value = store();
  }
  return { refresh, render };
}
