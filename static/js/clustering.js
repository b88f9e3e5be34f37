// The answer-clustering workspace (templates/audits/answers_workspace.html): clusters as boxes, answers
// moved by drag and drop or by keyboard, undo, save as a new version. Identical answers in a cluster are
// one item with a count and move together. The page's data comes from a JSON block (no inline script:
// the CSP allows same-origin scripts only); saving posts JSON and reloads, so history and agreement
// are the server's.
(function () {
  "use strict";
  const dataNode = document.getElementById("workspace-data");
  const board = document.getElementById("board");
  if (!dataNode || !board) return;
  const data = JSON.parse(dataNode.textContent);
  const csrf = document.querySelector("input[name=csrfmiddlewaretoken]").value;
  const message = document.getElementById("workspace-message");
  const errors = document.getElementById("workspace-errors");
  const undoButton = document.getElementById("undo-button");
  // Keys that move the selected answer to a cluster; n, m, r, x are commands.
  const KEYS = "123456789abcdefghijklopqstuvwyz";
  const INVALID = "invalid";
  const valueOf = new Map(data.answers.map(([id, value]) => [String(id), value]));

  let state = initialState();
  let selected = null; // {box: cluster index or INVALID, value}
  let mergeMode = false;
  let dirty = false;
  const undoStack = [];

  function initialState() {
    const byName = new Map();
    const invalid = new Set(data.invalid.map(String));
    const rest = [];
    for (const [id] of data.answers) {
      const key = String(id);
      const name = data.assignment[key];
      if (invalid.has(key)) continue;
      if (name === undefined) { rest.push(key); continue; }
      if (!byName.has(name)) byName.set(name, []);
      byName.get(name).push(key);
    }
    // Answers the starting clustering does not know (none yet, or new ones): one cluster per string.
    for (const key of rest) {
      let name = valueOf.get(key);
      if (byName.has(name) && !data.assignment[byName.get(name)[0]]) byName.get(name).push(key);
      else {
        while (byName.has(name)) name += " (new)";
        byName.set(name, [key]);
      }
    }
    const clusters = [...byName].map(([name, ids]) => ({ name, ids }));
    clusters.sort((a, b) => b.ids.length - a.ids.length);
    return { clusters, invalid: [...invalid].filter((key) => valueOf.has(key)) };
  }

  function idsOf(box) { return box === INVALID ? state.invalid : state.clusters[box].ids; }

  function groups(ids) {
    const counts = new Map();
    for (const id of ids) {
      const value = valueOf.get(id);
      counts.set(value, (counts.get(value) || 0) + 1);
    }
    return [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  }

  function say(text) { message.textContent = text; }

  function change(mutate) {
    undoStack.push(JSON.stringify(state));
    mutate();
    state.clusters = state.clusters.filter((c) => c.ids.length > 0);
    dirty = true;
    render();
  }

  function undo() {
    if (!undoStack.length) return say("Nothing to undo.");
    state = JSON.parse(undoStack.pop());
    dirty = true;
    say("Undone.");
    render();
  }

  function uniqueName(base) {
    const names = new Set(state.clusters.map((c) => c.name));
    let name = base, n = 2;
    while (names.has(name)) name = `${base} ${n++}`;
    return name;
  }

  // Move every answer equal to `value` from box `from` to box `to` (an index, INVALID or "new").
  function move(value, from, to) {
    if (from === to) return;
    let target = to;
    change(() => {
      const source = idsOf(from);
      const moving = source.filter((id) => valueOf.get(id) === value);
      const keep = source.filter((id) => valueOf.get(id) !== value);
      if (from === INVALID) state.invalid = keep; else state.clusters[from].ids = keep;
      if (to === "new") {
        state.clusters.push({ name: uniqueName(value), ids: moving });
        target = state.clusters[state.clusters.length - 1];
      } else if (to === INVALID) {
        state.invalid.push(...moving);
      } else {
        target = state.clusters[to];
        target.ids.push(...moving);
      }
    });
    // Selection follows the answer to its new box (indices shift when a cluster empties).
    const box = target === INVALID ? INVALID : state.clusters.indexOf(target);
    selected = { box, value };
    const where = box === INVALID ? "Invalid" : `“${state.clusters[box].name}”`;
    say(`Moved “${value}” to ${where}.`);
    render();
  }

  function merge(from, into) {
    if (from === into || from === INVALID || into === INVALID) return;
    const source = state.clusters[from], target = state.clusters[into];
    change(() => { target.ids.push(...source.ids); source.ids = []; });
    if (selected) selected = { box: state.clusters.indexOf(target), value: selected.value };
    say(`Merged “${source.name}” into “${target.name}”.`);
    render();
  }

  function rename(index, raw) {
    const cluster = state.clusters[index];
    const name = raw.trim();
    if (!name) { say("A cluster needs a name."); return render(); }
    if (name === cluster.name) return;
    const other = state.clusters.findIndex((c) => c.name === name);
    if (other >= 0) return merge(index, other); // two clusters cannot share a name: same name, same cluster
    change(() => { cluster.name = name; });
    say(`Renamed to “${name}”.`);
  }

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function box(index, title, ids) {
    const isCluster = typeof index === "number";
    const section = el("section", {
      class: isCluster ? "cluster-box" : index === INVALID ? "cluster-box invalid-box" : "cluster-box new-box",
      "data-box": String(index),
    });
    const head = el("header", { class: "cluster-head" });
    if (isCluster) {
      head.append(el("span", { class: "cluster-handle", draggable: "true", title: "Drag onto another cluster to merge", "data-box": String(index) }, "⠿"));
      head.append(el("kbd", { class: "cluster-key" }, KEYS[index] || ""));
      const input = el("input", { class: "cluster-name", value: title, "aria-label": "Cluster name", maxlength: "100" });
      input.addEventListener("change", () => rename(index, input.value));
      input.addEventListener("keydown", (e) => {
        if (e.key === "Enter" || e.key === "Escape") { if (e.key === "Escape") input.value = title; input.blur(); board.focus(); }
      });
      head.append(input);
    } else {
      head.append(el("kbd", { class: "cluster-key" }, index === INVALID ? "x" : "n"));
      head.append(el("span", { class: "cluster-title" }, title));
    }
    head.append(el("span", { class: "cluster-count" }, String(ids.length)));
    section.append(head);
    const list = el("ul", { class: "cluster-answers" });
    for (const [value, count] of groups(ids)) {
      const isSelected = selected && selected.box === index && selected.value === value;
      const item = el("li", { class: "answer" + (isSelected ? " selected" : ""), draggable: "true", "data-value": value, "aria-selected": String(!!isSelected) });
      item.append(el("span", { class: "answer-text" }, value));
      if (count > 1) item.append(el("span", { class: "answer-count" }, `×${count}`));
      item.addEventListener("click", () => { selected = { box: index, value }; render(); board.focus(); });
      item.addEventListener("dragstart", (e) => e.dataTransfer.setData("text/plain", JSON.stringify({ box: index, value })));
      list.append(item);
    }
    section.append(list);
    section.addEventListener("dragover", (e) => { e.preventDefault(); section.classList.add("drop-target"); });
    section.addEventListener("dragleave", () => section.classList.remove("drop-target"));
    section.addEventListener("drop", (e) => {
      e.preventDefault();
      section.classList.remove("drop-target");
      let payload;
      try { payload = JSON.parse(e.dataTransfer.getData("text/plain")); } catch (_) { return; }
      if (payload.merge !== undefined) merge(payload.merge, index);
      else move(payload.value, payload.box, index);
    });
    return section;
  }

  function render() {
    if (selected && selected.box !== INVALID && !state.clusters[selected.box]) selected = null;
    if (selected && !groups(idsOf(selected.box)).some(([v]) => v === selected.value)) selected = null;
    board.replaceChildren();
    state.clusters.forEach((cluster, i) => board.append(box(i, cluster.name, cluster.ids)));
    board.append(box(INVALID, "Invalid", state.invalid));
    board.append(box("new", "New cluster (drop here)", []));
    for (const handle of board.querySelectorAll(".cluster-handle")) {
      handle.addEventListener("dragstart", (e) => {
        e.stopPropagation();
        e.dataTransfer.setData("text/plain", JSON.stringify({ merge: Number(handle.dataset.box) }));
      });
    }
    undoButton.disabled = undoStack.length === 0;
    const chosen = board.querySelector(".answer.selected");
    if (chosen) chosen.scrollIntoView({ block: "nearest" });
  }

  // Every answer item in display order, for the arrow keys.
  function order() {
    const items = [];
    state.clusters.forEach((c, i) => groups(c.ids).forEach(([v]) => items.push({ box: i, value: v })));
    groups(state.invalid).forEach(([v]) => items.push({ box: INVALID, value: v }));
    return items;
  }

  function step(delta, byBox) {
    const items = order();
    if (!items.length) return;
    let at = selected ? items.findIndex((x) => x.box === selected.box && x.value === selected.value) : -1;
    if (byBox) {
      const boxes = [...new Set(items.map((x) => x.box))];
      const b = Math.max(0, Math.min(boxes.length - 1, boxes.indexOf(selected ? selected.box : boxes[0]) + delta));
      at = items.findIndex((x) => x.box === boxes[b]);
    } else {
      at = Math.max(0, Math.min(items.length - 1, at + delta));
    }
    selected = items[at];
    render();
  }

  document.addEventListener("keydown", (e) => {
    if (e.target.closest && e.target.closest("input, textarea, select")) return;
    const mod = e.ctrlKey || e.metaKey;
    const key = e.key.toLowerCase();
    if (mod && key === "z") { e.preventDefault(); return undo(); }
    if (mod && key === "s") { e.preventDefault(); return saveClustering(); }
    if (mod || e.altKey) return;
    const arrows = { ArrowDown: [1, false], ArrowUp: [-1, false], ArrowRight: [1, true], ArrowLeft: [-1, true] };
    if (arrows[e.key]) { e.preventDefault(); return step(...arrows[e.key]); }
    if (!selected) return;
    const target = KEYS.indexOf(key);
    if (mergeMode) {
      mergeMode = false;
      if (target >= 0 && target < state.clusters.length) merge(selected.box, target);
      else say("Merge cancelled.");
      return;
    }
    if (key === "m" && selected.box !== INVALID) { mergeMode = true; return say("Merge into which cluster? Press its key."); }
    if (key === "n") return move(selected.value, selected.box, "new");
    if (key === "x") return move(selected.value, selected.box, INVALID);
    if (key === "r" && selected.box !== INVALID) {
      e.preventDefault();
      const input = board.querySelectorAll(".cluster-box")[selected.box].querySelector(".cluster-name");
      input.focus();
      input.select();
      return;
    }
    if (target >= 0 && target < state.clusters.length) move(selected.value, selected.box, target);
  });

  async function saveClustering() {
    const assignment = {};
    for (const cluster of state.clusters) for (const id of cluster.ids) assignment[id] = cluster.name;
    const body = { role: data.role, baseVersion: data.baseVersion, basedOn: data.basedOn, assignment, invalid: state.invalid.map(Number) };
    say("Saving…");
    errors.hidden = true;
    let response, result;
    try {
      response = await fetch(data.saveUrl, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
        body: JSON.stringify(body),
        credentials: "same-origin",
      });
      result = await response.json();
    } catch (_) {
      return say("The save did not reach Chorus (network?): nothing was saved; try again.");
    }
    if (!response.ok) {
      errors.replaceChildren(...(result.errors || ["The save was refused."]).map((m) => el("li", {}, m)));
      errors.hidden = false;
      return say("Not saved.");
    }
    dirty = false;
    say(`Saved as version ${result.version} (${result.clusters} clusters).`);
    window.location.reload();
  }

  document.getElementById("save-button").addEventListener("click", saveClustering);
  undoButton.addEventListener("click", undo);
  document.getElementById("new-cluster-button").addEventListener("click", () => {
    if (selected) move(selected.value, selected.box, "new");
    else say("Select an answer first: it becomes the new cluster's first answer.");
  });
  window.addEventListener("beforeunload", (e) => { if (dirty) { e.preventDefault(); e.returnValue = ""; } });
  render();
})();
