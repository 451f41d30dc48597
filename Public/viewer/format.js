// How the viewer writes rates, byte counts and durations, and the order it lists ids and names in.

export const collator = new Intl.Collator(undefined, { numeric: true });

export function formatRate(value) {
  if (value >= 100) return String(Math.round(value));
  return value >= 10 ? value.toFixed(0) : value.toFixed(1).replace(/\.0$/, '');
}

export function formatBytes(value) {
  if (value < 1000) return `${Math.round(value)} B`;
  if (value < 1e6) return `${(value / 1e3).toFixed(value < 1e4 ? 1 : 0)} kB`;
  return `${(value / 1e6).toFixed(1)} MB`;
}

export function formatDuration(totalSeconds) {
  const s = Math.floor(totalSeconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = (n) => String(n).padStart(2, '0');
  return h > 0 ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
}
