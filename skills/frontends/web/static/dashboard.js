// Baton's dashboard: the live feed (server-sent events) and the conflict map.
// Everything shown from the stores is either HTML escaped by the server's templates or
// set here through textContent; nothing from the data is ever parsed as markup here.
"use strict";

const MAX_FEED = 100;
const SVG = "http://www.w3.org/2000/svg";

function fragment(html, container) {
  const holder = document.createElement(container);
  holder.innerHTML = html;  // server-rendered, autoescaped
  return holder.firstElementChild;
}

function applyChanges(change) {
  const body = document.querySelector("#tickets tbody");
  for (const [task, html] of Object.entries(change.rows)) {
    const row = fragment(html, "tbody");
    row.classList.add("updated");
    const old = document.getElementById("row-" + task);
    if (old) old.replaceWith(row); else body.prepend(row);
  }
  for (const task of change.gone) {
    const old = document.getElementById("row-" + task);
    if (old) old.remove();
  }
  if (change.order) {
    for (const task of change.order) {
      const row = document.getElementById("row-" + task);
      if (row) body.appendChild(row);
    }
  }
  const feed = document.getElementById("feed");
  for (const html of change.feed) {
    const item = fragment(html, "ul");
    if (document.querySelector(`#feed li[data-id="${CSS.escape(item.dataset.id)}"]`)) continue;
    item.classList.add("fresh");
    feed.prepend(item);
  }
  while (feed.children.length > MAX_FEED) feed.lastElementChild.remove();
  document.getElementById("stores").replaceWith(fragment(change.status, "div"));
  document.getElementById("summary").replaceWith(fragment(change.summary, "div"));
  const empty = document.getElementById("empty");
  if (empty && body.children.length) empty.remove();
  document.body.dataset.version = change.version;
}

// Last activity as "5m ago", the time itself kept as the tooltip; refreshed as time passes.
function showAges() {
  const now = Date.now();
  for (const time of document.querySelectorAll("time.ago")) {
    const seconds = Math.max(0, Math.floor((now - Date.parse(time.dateTime)) / 1000));
    if (!time.title) time.title = time.textContent;
    const [size, unit] = [[86400, "d"], [3600, "h"], [60, "m"]].find(([size]) => seconds >= size) || [0, ""];
    time.textContent = size ? `${Math.floor(seconds / size)}${unit} ago` : "just now";
  }
}

function listen() {
  const query = new URLSearchParams(location.search);
  query.set("v", document.body.dataset.version);
  const live = document.getElementById("live");
  const source = new EventSource("/events?" + query);
  source.addEventListener("open", () => { live.textContent = "live"; });
  source.addEventListener("error", () => { live.textContent = "reconnecting…"; });
  source.addEventListener("changes", (event) => {
    const change = JSON.parse(event.data);
    applyChanges(change);
    showAges();
    if (Object.keys(change.rows).length || change.gone.length) scheduleMap();
  });
}

// The conflict map: a small force layout (repulsion between tickets, springs along shared
// files), seeded on a circle so that the same data draws the same picture.
function layout(nodes, edges, width, height) {
  const n = nodes.length, index = new Map(nodes.map((node, i) => [node.id, i]));
  const radius = Math.min(width, height) * 0.42;
  // Started off the axes: no line is ever exactly horizontal or vertical by construction.
  const pos = nodes.map((_, i) => ({ x: width / 2 + radius * Math.cos(2 * Math.PI * i / n + 0.4),
                                     y: height / 2 + radius * Math.sin(2 * Math.PI * i / n + 0.4) }));
  const links = edges.map((e) => [index.get(e.a), index.get(e.b)]);
  const k = Math.sqrt(width * height / Math.max(n, 1)) * 0.4, rest = 70;
  for (let step = 0, heat = width / 8; step < 300; step++, heat *= 0.985) {
    const move = pos.map(() => ({ x: 0, y: 0 }));
    for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) {
      const dx = pos[i].x - pos[j].x, dy = pos[i].y - pos[j].y, d = Math.max(Math.hypot(dx, dy), 0.01);
      const f = k * k / d;
      move[i].x += dx / d * f; move[i].y += dy / d * f; move[j].x -= dx / d * f; move[j].y -= dy / d * f;
    }
    for (const [i, j] of links) {
      // A spring with a rest length: a cluster of tickets sharing files keeps its labels apart.
      const dx = pos[i].x - pos[j].x, dy = pos[i].y - pos[j].y, d = Math.max(Math.hypot(dx, dy), 0.01);
      const f = (d - rest) * 0.5;
      move[i].x -= dx / d * f; move[i].y -= dy / d * f; move[j].x += dx / d * f; move[j].y += dy / d * f;
    }
    for (let i = 0; i < n; i++) {
      // Gravity keeps separate clusters near each other instead of in the corners.
      move[i].x += (width / 2 - pos[i].x) * 0.15; move[i].y += (height / 2 - pos[i].y) * 0.15;
      const d = Math.max(Math.hypot(move[i].x, move[i].y), 0.01), limit = Math.min(d, heat);
      pos[i].x += move[i].x / d * limit; pos[i].y += move[i].y / d * limit;
    }
  }
  // Fit the drawing to the canvas, room left on the right for the labels.
  const xs = pos.map((p) => p.x), ys = pos.map((p) => p.y);
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const scale = Math.min((width - 110) / Math.max(x1 - x0, 1), (height - 40) / Math.max(y1 - y0, 1), 1.5);
  const [ox, oy] = [(width - 80 - (x1 - x0) * scale) / 2, (height - (y1 - y0) * scale) / 2];
  return pos.map((p) => ({ x: ox + (p.x - x0) * scale, y: oy + (p.y - y0) * scale }));
}

function element(name, attributes) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  return node;
}

// A lease edge in words: its holder, kind and pattern, what of the other ticket it meets, its expiry.
function leaseText(edge) {
  const lease = edge.lease, kind = (exclusive) => exclusive ? "exclusive" : "shared";
  const met = lease.other_pattern ? `overlaps ${lease.other}'s ${kind(lease.other_exclusive)} lease ${lease.other_pattern}`
    : `covers ${edge.files.length + lease.paths_more} file${edge.files.length + lease.paths_more === 1 ? "" : "s"} ${lease.other} touched`;
  const soon = lease.expiring ? ", expiring soon" : "";
  return `${lease.holder} holds ${kind(lease.exclusive)} lease ${lease.pattern} (until ${lease.expires_at.slice(0, 16)}Z${soon}); it ${met}`;
}

function bent(a, b) {
  const [dx, dy] = [b.x - a.x, b.y - a.y], d = Math.max(Math.hypot(dx, dy), 0.01), bend = 24;
  return `M ${a.x} ${a.y} Q ${(a.x + b.x) / 2 - dy / d * bend} ${(a.y + b.y) / 2 + dx / d * bend} ${b.x} ${b.y}`;
}

function edgeClass(edge) {
  if (edge.fork_of) return "edge fork";
  if (!edge.lease) return "edge";
  return "edge lease" + (edge.lease.exclusive ? " exclusive" : "") + (edge.lease.expiring ? " expiring" : "");
}

function showEdge(edge, line) {
  document.querySelectorAll("#map .edge.selected").forEach((l) => l.classList.remove("selected"));
  line.classList.add("selected");
  const panel = document.getElementById("edge-files");
  const shared = `${edge.files.length} shared file${edge.files.length === 1 ? "" : "s"}`;
  document.getElementById("edge-title").textContent = edge.lease ? leaseText(edge) : edge.fork_of
    ? `fork of: ${edge.fork_of}; ${shared}, expected (not a conflict)` : `${edge.a} ↔ ${edge.b}: ${shared}`;
  const list = document.getElementById("edge-list");
  list.replaceChildren(...edge.files.map((path) => {
    const item = document.createElement("li");
    const code = document.createElement("code");
    code.textContent = path;
    item.appendChild(code);
    return item;
  }));
  panel.hidden = false;
}

async function drawMap() {
  const svg = document.getElementById("map");
  const note = document.getElementById("map-note");
  const response = await fetch("/api/map" + location.search, { credentials: "same-origin" });
  if (!response.ok) { note.textContent = `map unavailable (HTTP ${response.status})`; return; }
  const map = await response.json();
  const [width, height] = [600, 420];
  svg.replaceChildren();
  if (map.graph !== "ok") note.textContent = map.graph;
  else if (map.leases !== "ok") note.textContent = `leases not shown: ${map.leases}`;
  else if (!map.nodes.length) note.textContent = "No conflicts between active tickets.";
  else note.textContent = map.in_conflict > map.nodes.length
    ? `The ${map.nodes.length} tickets with the most conflicts, of ${map.in_conflict} in conflict; filter to see others.`
    : `${map.nodes.length} tickets in conflict; click a line for the files they share or the lease between them.`;
  const pos = layout(map.nodes, map.edges, width, height);
  const at = new Map(map.nodes.map((node, i) => [node.id, pos[i]]));
  for (const edge of map.edges) {
    const [a, b] = [at.get(edge.a), at.get(edge.b)];
    // A lease bends away from the straight line of the files the same two tickets share.
    const [shape, geometry] = edge.lease ? ["path", { d: bent(a, b) }] : ["line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y }];
    const hit = element(shape, { ...geometry, class: "hit" });
    const line = element(shape, { ...geometry, class: edgeClass(edge),
                                   "stroke-width": Math.min(1 + edge.files.length, 8),
                                   "data-a": edge.a, "data-b": edge.b });
    const title = element("title", {});
    title.textContent = edge.lease ? leaseText(edge)
      : edge.fork_of ? `fork of: ${edge.fork_of} (expected overlap)` : `${edge.a} ↔ ${edge.b}`;
    hit.appendChild(title);
    hit.addEventListener("click", () => showEdge(edge, line));
    svg.append(hit, line);
  }
  for (const node of map.nodes) {
    const p = at.get(node.id);
    const link = element("a", { href: "/ticket/" + encodeURIComponent(node.id) });
    const classes = [node.stale ? "stale" : "", node.exclusive_lease ? "exclusive-lease" : ""].filter(Boolean);
    link.append(element("circle", { cx: p.x, cy: p.y, r: 6, class: classes.join(" ") }));
    const label = element("text", { x: p.x + 8, y: p.y + 3 });
    label.textContent = node.id;
    link.appendChild(label);
    svg.appendChild(link);
  }
}

let mapTimer = null;
function scheduleMap() {
  if (mapTimer) return;
  mapTimer = setTimeout(() => { mapTimer = null; drawMap(); }, 1000);
}

document.addEventListener("DOMContentLoaded", () => {
  if (document.body.dataset.page !== "overview") return;
  showAges();
  setInterval(showAges, 30000);
  drawMap();
  listen();
});
