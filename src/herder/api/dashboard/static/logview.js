// A run's log as the run page shows it: the chunks as they arrive (stdout and stderr told
// apart), a search that keeps only the lines containing its text and marks each match (live
// while the log is followed), and a download of the whole log as a .txt file (a Blob made
// here: nothing leaves the page, and the policy's default-src 'self' lets a blob: download).

import { h } from "./dom.js";

// The lines of these chunks, each a list of its pieces with their streams.
function lines(chunks) {
  const all = [];
  let current = [];
  for (const chunk of chunks) {
    const parts = chunk.text.split("\n");
    parts.forEach((part, index) => {
      if (part) current.push({ stream: chunk.stream, text: part });
      if (index < parts.length - 1) {
        all.push(current);
        current = [];
      }
    });
  }
  if (current.length) all.push(current);
  return all;
}

// ``text`` as nodes, each case-insensitive match of ``needle`` in a <mark>; and the count.
function marked(text, needle) {
  const nodes = [];
  const lower = text.toLowerCase();
  let from = 0;
  let count = 0;
  for (let at = lower.indexOf(needle); at !== -1; at = lower.indexOf(needle, at + needle.length)) {
    if (at > from) nodes.push(text.slice(from, at));
    nodes.push(h("mark", {}, text.slice(at, at + needle.length)));
    from = at + needle.length;
    count += 1;
  }
  if (from < text.length) nodes.push(text.slice(from));
  return { nodes, count };
}

export function logView(fileName) {
  const pre = h("pre", { class: "logs", id: "logs", tabindex: "0" });
  const found = h("span", { class: "log-count muted", role: "status" });
  const search = h("input", { type: "search", placeholder: "show lines containing…", "aria-label": "Search the log", oninput: () => redraw() });
  const download = h("button", { type: "button", onclick: () => save() }, "Download .txt");
  const tools = h("div", { class: "log-tools" }, search, found, download);
  let chunks = []; // every chunk shown since the view (or rank) began: the whole log

  const needle = () => search.value.toLowerCase();

  function scrolled(draw) {
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    draw();
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }

  function chunkNode(chunk) {
    return chunk.separator ? h("span", { class: "separator" }, chunk.text) : h("span", { class: `stream-${chunk.stream}` }, chunk.text);
  }

  // The matching lines alone, matches marked, and how many there are.
  function redraw() {
    scrolled(() => {
      if (!needle()) {
        pre.replaceChildren(...chunks.map(chunkNode));
        found.textContent = "";
        return;
      }
      let count = 0;
      let matching = 0;
      const shown = [];
      for (const line of lines(chunks.filter((chunk) => !chunk.separator))) {
        if (!line.map((piece) => piece.text).join("").toLowerCase().includes(needle())) continue;
        matching += 1;
        for (const piece of line) {
          const match = marked(piece.text, needle());
          count += match.count;
          shown.push(h("span", { class: `stream-${piece.stream}` }, match.nodes));
        }
        shown.push("\n");
      }
      pre.replaceChildren(...shown);
      found.textContent = `${count} match${count === 1 ? "" : "es"} in ${matching} line${matching === 1 ? "" : "s"}`;
    });
  }

  function save() {
    const text = chunks.map((chunk) => chunk.text).join("");
    const url = URL.createObjectURL(new Blob([text], { type: "text/plain;charset=utf-8" }));
    const anchor = h("a", { href: url, download: fileName() });
    document.body.append(anchor);
    anchor.click();
    anchor.remove();
    setTimeout(() => URL.revokeObjectURL(url), 0);
  }

  return {
    tools,
    pre,
    append(more) {
      chunks = chunks.concat(more);
      if (needle()) redraw();
      else scrolled(() => pre.append(...more.map(chunkNode)));
    },
    separator(text) {
      this.append([{ separator: true, text }]);
    },
    clear() {
      chunks = [];
      redraw();
    },
  };
}
