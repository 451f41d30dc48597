// The animate job's controls: start, stop and retune the gateway's `animate` job on the store shown.

import { api } from './api.js';
import { ui } from './page.js';
import { showToast } from './toast.js';

const JOB_POLL_MS = 3000;

/**
 * Wires the controls (#animate-…) to the jobs of the store `store()` names; polls them while shown.
 * Nothing is started for a name no store can have (`isStoreName()` false).
 */
export function createJobs({ store, isStoreName = () => true }) {
  let running = []; // this store's running animate jobs
  let known = false;
  let rateEdit = null;

  async function refresh() {
    try {
      const payload = await api('GET', '/api/jobs');
      const list = payload && Array.isArray(payload.jobs) ? payload.jobs : [];
      running = list.filter((job) => job && job.store === store() && job.kind === 'animate' && job.state === 'running');
      known = true;
    } catch {
      known = false;
    }
    render();
  }

  function render() {
    const jobState = !known ? 'unknown' : running.length > 0 ? 'running' : 'stopped';
    ui.jobState.dataset.state = jobState;
    if (!known) {
      ui.jobState.textContent = 'Jobs unavailable';
    } else if (running.length > 0) {
      const rate = running.reduce((sum, job) => sum + (Number(job.rate) || 0), 0);
      ui.jobState.textContent = `Running · ${running.map((job) => job.id).join(', ')} · ${formatJobRate(rate)}`;
      if (rateEdit === null && document.activeElement !== ui.rateInput) showRate(rate);
    } else {
      ui.jobState.textContent = 'Stopped';
    }
    ui.start.disabled = !known || running.length > 0 || !isStoreName();
    ui.stop.disabled = !known || running.length === 0;
  }

  function showRate(rate) {
    const clamped = Math.min(Number(ui.rateInput.max), Math.max(Number(ui.rateInput.min), Math.round(rate)));
    ui.rateInput.value = String(clamped);
    ui.rateValue.textContent = `${formatJobRate(rate)}`;
  }

  async function act(work) {
    ui.start.disabled = ui.stop.disabled = true;
    try { await work(); } catch (error) { showToast(`Animate: ${error.message}`); }
    await refresh();
  }

  ui.start.addEventListener('click', () => act(() =>
    api('POST', '/api/jobs', { kind: 'animate', store: store(), rate: Number(ui.rateInput.value) })));
  ui.stop.addEventListener('click', () => act(() =>
    Promise.all(running.map((job) => api('DELETE', `/api/jobs/${encodeURIComponent(job.id)}`)))));
  ui.rateInput.addEventListener('input', () => {
    ui.rateValue.textContent = formatJobRate(Number(ui.rateInput.value));
    clearTimeout(rateEdit);
    rateEdit = setTimeout(() => {
      rateEdit = null;
      const rate = Number(ui.rateInput.value);
      if (running.length > 0) {
        act(() => Promise.all(running.map((job) => api('PATCH', `/api/jobs/${encodeURIComponent(job.id)}`, { rate }))));
      }
    }, 150);
  });

  setInterval(() => { if (document.visibilityState !== 'hidden') refresh(); }, JOB_POLL_MS);
  return { refresh };
}

function formatJobRate(rate) {
  const text = rate >= 10 || Number.isInteger(rate) ? String(Math.round(rate)) : String(Number(rate.toPrecision(2)));
  return `${text} / s`;
}
