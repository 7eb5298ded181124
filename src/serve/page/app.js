// tarnn serve's page: draw (or pick) a digit, choose what is known, and follow the completions
// as the server streams them (server-sent events over fetch). No build step, no dependencies.
'use strict';

const $ = (id) => document.getElementById(id);
let H = 28, W = 28, C = 1, T = 784;
let image, mask; // Uint8Array(T): the drawing; 1 where the model is given the byte
let tool = 'pen';
// what the page holds, for tests and the curious: the drawing, the runs' images, events seen
const page = { image: null, mask: null, completions: [], samples: [], grows: 0, b64: (a) => b64encode(a) };
window.tarnnPage = page;

const b64encode = (bytes) => {
  let s = '';
  for (let i = 0; i < bytes.length; ++i) s += String.fromCharCode(bytes[i]);
  return btoa(s);
};
const b64decode = (text) => {
  const s = atob(text), a = new Uint8Array(s.length);
  for (let i = 0; i < s.length; ++i) a[i] = s.charCodeAt(i);
  return a;
};

// Bytes (raster order, channels interleaved) onto a canvas of W x H. Bytes from `upto` on are not
// produced yet (dark slate); where `known` is 0 the pixel is shaded red (the drawing's mask).
function paint(canvas, bytes, upto = T, known = null) {
  const ctx = canvas.getContext('2d');
  const out = ctx.createImageData(W, H);
  for (let p = 0; p < W * H; ++p) {
    const at = p * C;
    let r, g, b;
    if (at + C - 1 >= upto) {
      r = 30; g = 36; b = 52;
    } else if (C === 1) {
      r = g = b = bytes[at];
    } else { // RGB as it is; two channels as red and green
      r = bytes[at]; g = bytes[at + 1]; b = C >= 3 ? bytes[at + 2] : 0;
    }
    if (known && !known[at]) { r = 0.55 * r + 0.45 * 224; g = 0.55 * g + 0.45 * 49; b = 0.55 * b + 0.45 * 49; }
    out.data.set([r, g, b, 255], p * 4);
  }
  ctx.putImageData(out, 0, 0);
}

const redraw = () => paint($('draw'), image, T, mask);

// ---- drawing: pointer events cover mouse, pen and touch ----------------------------------------
function brush(x, y) {
  for (let py = Math.floor(y - 2); py <= y + 2; ++py)
    for (let px = Math.floor(x - 2); px <= x + 2; ++px) {
      if (px < 0 || py < 0 || px >= W || py >= H) continue;
      const d2 = (px + 0.5 - x) ** 2 + (py + 0.5 - y) ** 2;
      const v = Math.max(0, Math.min(1, 1.6 - d2 / 1.8)); // a soft round tip, like MNIST's pens
      if (v <= 0) continue;
      const at = py * W + px;
      if (tool === 'pen') image[at] = Math.max(image[at], Math.round(255 * v));
      else if (tool === 'eraser') image[at] = Math.min(image[at], Math.round(255 * (1 - v)));
      else if (v > 0.5) mask[at] = tool === 'unmask' ? 1 : 0;
    }
}

function setupDrawing() {
  const canvas = $('draw');
  let last = null;
  const at = (e) => {
    const r = canvas.getBoundingClientRect();
    return [((e.clientX - r.left) / r.width) * W, ((e.clientY - r.top) / r.height) * H];
  };
  const stroke = (e) => {
    const [x, y] = at(e);
    const [x0, y0] = last || [x, y];
    const n = Math.max(1, Math.ceil(Math.hypot(x - x0, y - y0) / 0.4));
    for (let i = 1; i <= n; ++i) brush(x0 + ((x - x0) * i) / n, y0 + ((y - y0) * i) / n);
    last = [x, y];
    redraw();
  };
  canvas.addEventListener('pointerdown', (e) => {
    canvas.setPointerCapture(e.pointerId);
    last = null;
    stroke(e);
  });
  canvas.addEventListener('pointermove', (e) => { if (last) stroke(e); });
  const end = () => {
    if (!last) return;
    last = null;
    if (tool === 'mask' || tool === 'unmask') $('keep-rows-value').textContent = 'painted';
    scoreSoon();
  };
  canvas.addEventListener('pointerup', end);
  canvas.addEventListener('pointercancel', end);
  for (const name of ['pen', 'eraser', 'mask', 'unmask'])
    $('tool-' + name).addEventListener('click', () => {
      tool = name;
      for (const b of document.querySelectorAll('.seg button')) b.classList.toggle('on', b.id === 'tool-' + name);
    });
  $('clear').addEventListener('click', () => { image.fill(0); redraw(); scoreSoon(); });
  $('keep-rows').addEventListener('input', () => setKeepRows(+$('keep-rows').value));
}

function setKeepRows(rows) {
  $('keep-rows-value').textContent = rows;
  for (let i = 0; i < T; ++i) mask[i] = i < rows * W * C ? 1 : 0;
  redraw();
}

// ---- the API ------------------------------------------------------------------------------------
async function post(path, body) {
  const res = await fetch(path, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  if (!res.ok) {
    let message = res.status + ' ' + res.statusText;
    try { message = (await res.json()).error; } catch (e) { /* not JSON */ }
    throw new Error(message);
  }
  return res;
}

// POSTs and hands each server-sent event to onEvent(name, data) until the stream ends.
async function stream(path, body, onEvent) {
  const res = await post(path, body);
  const reader = res.body.getReader(), decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = 'message', data = '';
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) name = line.slice(7);
        else if (line.startsWith('data: ')) data += line.slice(6);
      }
      if (data) onEvent(name, JSON.parse(data));
    }
  }
}

let scoreTimer = null;
function scoreSoon() {
  clearTimeout(scoreTimer);
  scoreTimer = setTimeout(async () => {
    const sent = b64encode(image);
    try {
      const r = await (await post('/api/score', { image: sent })).json();
      $('bpd').textContent = r.bits_per_dim.toFixed(3);
      page.scored = sent; // the drawing this figure is of
    } catch (e) {
      $('bpd').textContent = '(' + e.message + ')';
    }
  }, 250);
}

// A streamed run into `count` canvases under `grid`: the images grow as columns arrive.
async function run(path, body, count, grid, statsEl, button, keep) {
  grid.replaceChildren();
  const canvases = [], images = [];
  for (let k = 0; k < count; ++k) {
    const fig = document.createElement('figure'), c = document.createElement('canvas');
    c.width = W; c.height = H;
    fig.append(c);
    grid.append(fig);
    canvases.push(c);
    images.push(new Uint8Array(T));
    paint(c, images[k], 0);
  }
  keep.length = 0;
  keep.push(...images);
  let produced = 0, pending = false;
  const t0 = performance.now();
  const show = () => {
    pending = false;
    canvases.forEach((c, k) => paint(c, images[k], produced));
  };
  button.disabled = true;
  document.body.dataset.state = 'running';
  statsEl.classList.remove('error');
  try {
    await stream(path, body, (name, d) => {
      if (name === 'grow') {
        page.grows += 1;
        d.images.forEach((text, k) => images[k].set(b64decode(text), d.from));
        produced = d.to + 1;
        const s = (performance.now() - t0) / 1000;
        // the whole batch's rate so far: its images advance together, column by column
        const imagesPerSecond = (d.batch_images * (d.to + 1)) / T / Math.max(d.seconds, 1e-3);
        statsEl.textContent = `row ${Math.ceil(produced / (W * C))} of ${H} · ` +
          `${imagesPerSecond.toFixed(1)} images/s · ` +
          `${Math.round((count * produced) / s).toLocaleString()} pixels/s here · ` +
          `batch of ${d.batch_images} images from ${d.batch_requests} ` +
          `request${d.batch_requests > 1 ? 's' : ''}`;
        page.runningStats = statsEl.textContent;
        if (!pending) { pending = true; requestAnimationFrame(show); }
      } else if (name === 'done') {
        show();
        statsEl.textContent = `${d.seconds.toFixed(2)} s · ` +
          `${d.images_per_second.toFixed(1)} images/s · ` +
          `${Math.round(d.pixels_per_second).toLocaleString()} pixels/s · ` +
          `batch of ${d.batch_images} images from ${d.batch_requests} ` +
          `request${d.batch_requests > 1 ? 's' : ''}`;
      } else if (name === 'error') {
        throw new Error(d.error);
      }
    });
    document.body.dataset.state = 'done';
  } catch (e) {
    statsEl.textContent = e.message;
    statsEl.classList.add('error');
    document.body.dataset.state = 'error';
  } finally {
    button.disabled = false;
  }
}

function seedOf(input) {
  const v = input.value.trim();
  return /^[0-9]{1,15}$/.test(v) ? Number(v) : 0;
}

// The sampler's temperature as typed: the server refuses anything but a number above 0, saying so.
function temperatureOf(input) {
  return Number(input.value);
}

function setupRuns() {
  $('complete').addEventListener('click', () => {
    const samples = +$('samples').value;
    run('/api/complete', { image: b64encode(image), mask: b64encode(mask), samples, seed: seedOf($('seed')),
                           temperature: temperatureOf($('temperature')) },
        samples, $('completions'), $('complete-stats'), $('complete'), page.completions);
  });
  $('sample').addEventListener('click', () => {
    const n = +$('sample-n').value;
    run('/api/sample', { n, seed: seedOf($('sample-seed')), temperature: temperatureOf($('sample-temperature')) },
        n, $('sample-grid'), $('sample-stats'), $('sample'), page.samples);
  });
}

async function setupExamples() {
  if (!(H === 28 && W === 28 && C === 1)) return;
  const { digits } = await (await fetch('/digits.json')).json();
  for (const d of digits) {
    const c = document.createElement('canvas');
    c.width = W; c.height = H;
    c.title = `MNIST test image ${d.index} (a ${d.label})`;
    const bytes = b64decode(d.image);
    paint(c, bytes);
    c.addEventListener('click', () => { image.set(bytes); redraw(); scoreSoon(); });
    $('examples').append(c);
  }
}

async function main() {
  const info = await (await fetch('/api/info')).json();
  H = info.height; W = info.width; C = info.channels; T = H * W * C;
  $('model').textContent = `${info.model} · ${H}x${W}x${C} · ${info.device_name}`;
  $('version').textContent = 'tarnn ' + info.version;
  $('draw').width = W;
  $('draw').height = H;
  image = new Uint8Array(T);
  mask = new Uint8Array(T);
  page.image = image;
  page.mask = mask;
  $('keep-rows').max = H;
  $('keep-rows').value = Math.floor(H / 2);
  setKeepRows(Math.floor(H / 2));
  if (C !== 1) { // drawing is for grayscale models; sampling works for any
    for (const id of ['draw-card', 'mask-card', 'completions-card']) $(id).hidden = true;
  }
  setupDrawing();
  setupRuns();
  await setupExamples();
  const first = document.querySelector('#examples canvas');
  if (first) first.click(); // start with a real digit: one click from a completion
  document.body.dataset.state = 'ready';
}

main().catch((e) => {
  $('model').textContent = 'cannot reach the server: ' + e.message;
  $('model').classList.add('error');
});
