// Painting tiles by hand: the brush, its swatches, and a click on a tile that paints it.

import { api, storePath } from './api.js';
import { safeColor } from './colors.js';
import { ui } from './page.js';
import { showToast } from './toast.js';

const SWATCHES = ['#ff7a59', '#ffc53d', '#73d13d', '#36cfc9', '#4096ff', '#9254de', '#262626'];

/** Sets up the brush; a click on a tile paints it in the store `store()` names, through `client`. */
export function setUpBrush({ client, store }) {
  for (const color of SWATCHES) {
    const swatch = document.createElement('button');
    swatch.type = 'button';
    swatch.className = 'swatch';
    swatch.style.backgroundColor = color;
    swatch.setAttribute('aria-label', `Brush ${color}`);
    swatch.addEventListener('click', () => { ui.brush.value = color; markBrush(); });
    ui.swatches.append(swatch);
  }

  function markBrush() {
    for (const swatch of ui.swatches.children) {
      swatch.setAttribute('aria-pressed', String(swatch.getAttribute('aria-label') === `Brush ${ui.brush.value}`));
    }
  }
  ui.brush.addEventListener('input', markBrush);
  markBrush();

  // Buttons turn Enter and Space into clicks, so one listener serves mouse, touch and keyboard.
  ui.grid.addEventListener('click', async (event) => {
    const el = event.target.closest('.tile');
    if (!el || !ui.grid.contains(el)) return;
    const color = safeColor(ui.brush.value);
    if (!color) return;
    try {
      // Over the live view's WebSocket, allowed by the connection's write grant (a token's, or the
      // connect hook's) or by the backend's write hook: a page needs no API key to paint. Over SSE,
      // which carries nothing upstream, by HTTP with the page's token.
      if (client.transport === 'sse') {
        await api('PATCH', `${storePath(store())}/models/${encodeURIComponent(el.dataset.model)}`, { color });
      } else {
        await client.commit(store(), [{ op: 'patch', model: el.dataset.model, value: { color } }]);
      }
    } catch (error) {
      showToast(`Could not paint ${el.dataset.model}: ${error.message}`);
    }
  });
}
