// Colors from the store, checked before they reach the page: safeColor, and inkFor the text on them.

const HEX_COLOR = /^#(?:[0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})$/i;
const NUMBER = '(?:\\d{1,3}(?:\\.\\d+)?%?)';
const ALPHA = '(?:0|1|0?\\.\\d+|\\d{1,3}%)';
const RGB_COLOR = new RegExp(
  `^rgba?\\(\\s*${NUMBER}\\s*(?:,\\s*${NUMBER}\\s*,\\s*${NUMBER}\\s*(?:,\\s*${ALPHA}\\s*)?` +
  `|\\s${NUMBER}\\s+${NUMBER}\\s*(?:\\/\\s*${ALPHA}\\s*)?)\\)$`, 'i');
const NAMED_COLOR = /^[a-z]{3,20}$/i;
const NOT_COLORS = new Set(['inherit', 'initial', 'unset', 'revert', 'currentcolor']);

/** The color as a CSS value if it is a hex, rgb() or named color; otherwise null. */
export function safeColor(value) {
  if (typeof value !== 'string' || value.length > 64) return null;
  const text = value.trim();
  let shaped = HEX_COLOR.test(text) || RGB_COLOR.test(text);
  if (!shaped && NAMED_COLOR.test(text)) shaped = !NOT_COLORS.has(text.toLowerCase());
  if (!shaped) return null;
  if (window.CSS && CSS.supports && !CSS.supports('color', text)) return null;
  return HEX_COLOR.test(text) ? text.toLowerCase() : text;
}

const colorProbe = document.createElement('canvas').getContext('2d');
const inkCache = new Map();

/** 'dark' or 'light': the text color that reads best on `color`. */
export function inkFor(color) {
  let ink = inkCache.get(color);
  if (ink) return ink;
  ink = 'light';
  if (colorProbe) {
    colorProbe.fillStyle = '#000000';
    colorProbe.fillStyle = color;
    const rgb = parseRGB(colorProbe.fillStyle);
    if (rgb) {
      const [r, g, b] = rgb.map((c) => {
        const s = c / 255;
        return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
      });
      ink = 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.36 ? 'dark' : 'light';
    }
  }
  if (inkCache.size > 2048) inkCache.clear();
  inkCache.set(color, ink);
  return ink;
}

function parseRGB(text) {
  const hex = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(text);
  if (hex) return hex.slice(1).map((h) => parseInt(h, 16));
  const rgb = /^rgba?\((\d+),\s*(\d+),\s*(\d+)/i.exec(text);
  return rgb ? rgb.slice(1).map(Number) : null;
}
