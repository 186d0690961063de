// A small, safe markdown renderer for message text. It knows a subset:
// paragraphs, line breaks, "- " and "1. " lists, ``` code blocks, "#"
// headings (shown as bold lines), `code`, **bold**, *italics*, _italics_
// and [links](…). It builds DOM nodes with textContent only: text
// from the API is never parsed as HTML, and links go to http(s) URLs only.

import { h } from "./dom.js";

const INLINE = new RegExp([
  "`([^`\\n]+)`", // 1: code
  "\\*\\*(?=\\S)([^*\\n]+?)\\*\\*", // 2: bold
  "(?<![\\w])__(?=\\S)([^_\\n]+?)__(?![\\w])", // 3: bold
  "\\*(?=[^\\s*])([^*\\n]+?)\\*", // 4: italics
  "(?<![\\w])_(?=[^\\s_])([^_\\n]+?)_(?![\\w])", // 5: italics
  "\\[([^\\]\\n]+)\\]\\((https?://[^\\s)]+)\\)", // 6, 7: link
].join("|"), "g");

// inline returns the nodes of one line of text with inline markup.
export function inline(text) {
  const out = [];
  let last = 0;
  // matchAll works on a copy of the regexp: bold text is parsed recursively.
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[1] !== undefined) out.push(h("code", {}, m[1]));
    else if (m[2] !== undefined || m[3] !== undefined) out.push(h("strong", {}, inline(m[2] ?? m[3])));
    else if (m[4] !== undefined || m[5] !== undefined) out.push(h("em", {}, m[4] ?? m[5]));
    else out.push(h("a", { href: m[7], rel: "noopener noreferrer nofollow", target: "_blank" }, m[6]));
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBER = /^\s*(\d{1,9})[.)]\s+(.*)$/;
const HEADING = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/;
const FENCE = /^\s*```/;

// list builds nested lists from consecutive list lines: a line indented
// more than the one before starts a list inside that item.
function list(lines) {
  const item = (line) => {
    const b = BULLET.exec(line), n = NUMBER.exec(line);
    return { indent: line.search(/\S/), ordered: !b, start: n ? n[1] : "1", text: b ? b[1] : n[2] };
  };
  const open = (it) => h(it.ordered ? "ol" : "ul", it.ordered && it.start !== "1" ? { start: it.start } : {});
  const first = item(lines[0]);
  const root = open(first);
  const stack = [{ el: root, indent: first.indent }];
  for (const line of lines) {
    const it = item(line);
    while (stack.length > 1 && it.indent < stack[stack.length - 1].indent) stack.pop();
    let top = stack[stack.length - 1];
    if (it.indent > top.indent && top.el.lastElementChild) {
      const sub = open(it);
      top.el.lastElementChild.appendChild(sub);
      top = { el: sub, indent: it.indent };
      stack.push(top);
    }
    top.el.appendChild(h("li", {}, inline(it.text)));
  }
  return root;
}

// markdown returns a DocumentFragment with text rendered as markdown.
export function markdown(text) {
  const frag = document.createDocumentFragment();
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  let para = [];
  const flush = () => {
    if (!para.length) return;
    const p = h("p", {});
    para.forEach((l, i) => {
      if (i) p.appendChild(h("br", {}));
      p.append(...inline(l).map((n) => (typeof n === "string" ? document.createTextNode(n) : n)));
    });
    frag.appendChild(p);
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (FENCE.test(line)) {
      flush();
      const code = [];
      for (i++; i < lines.length && !FENCE.test(lines[i]); i++) code.push(lines[i]);
      frag.appendChild(h("pre", { class: "md-code" }, h("code", {}, code.join("\n"))));
      continue;
    }
    if (BULLET.test(line) || NUMBER.test(line)) {
      flush();
      const start = i;
      while (i < lines.length && (BULLET.test(lines[i]) || NUMBER.test(lines[i]))) i++;
      frag.appendChild(list(lines.slice(start, i)));
      i--;
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      flush();
      frag.appendChild(h("p", { class: "md-heading" }, h("strong", {}, inline(heading[1]))));
      continue;
    }
    if (!line.trim()) flush();
    else para.push(line);
  }
  flush();
  return frag;
}
