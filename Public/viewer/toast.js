// The toast: a short message at the foot of the page, gone after a few seconds.

import { ui } from './page.js';

let toastTimer = null;
export function showToast(text) {
  ui.toast.textContent = text;
  ui.toast.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { ui.toast.hidden = true; }, 4000);
}
