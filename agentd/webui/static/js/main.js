// The page's entry point: routing on the URL fragment, notices and the API
// key button.

import { apiKey, askForKey, onKeyChange } from "./api.js";
import { listView } from "./list.js";
import { threadView } from "./thread.js";
import { h } from "./dom.js";

const main = document.getElementById("main");
const notices = document.getElementById("notices");
let view = null;

// notify shows a dismissible notice; errors stay until dismissed, other
// notices for 6 s.
function notify(text, kind = "info") {
  const close = h("button", { type: "button", class: "linkish", "aria-label": "Dismiss" }, "×");
  const el = h("div", { class: "notice " + kind }, h("span", {}, text), close);
  close.addEventListener("click", () => el.remove());
  notices.appendChild(el);
  while (notices.children.length > 4) notices.firstChild.remove();
  if (kind !== "error") setTimeout(() => el.remove(), 6000);
}

function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

// route parses "#/", "#/?filters" and "#/t/{id}?params" and shows the view.
function route() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, query] = raw.split("?", 2);
  const params = new URLSearchParams(query || "");
  if (view && view.destroy) view.destroy();
  const ctx = { notify, go };
  const m = path.match(/^\/t\/([^/]+)$/);
  if (m) {
    view = threadView(main, decodeURIComponent(m[1]), params, ctx);
    document.getElementById("nav-threads").removeAttribute("aria-current");
  } else {
    document.title = "Threads · convlog";
    view = listView(main, params, ctx);
    document.getElementById("nav-threads").setAttribute("aria-current", "page");
  }
}

function showKeyState(k) {
  document.getElementById("key-state").textContent = k ? "key …" + k.slice(-4) : "";
  document.getElementById("key-forget").hidden = !k;
}

document.getElementById("key-button").addEventListener("click", async () => {
  const had = apiKey();
  if (await askForKey(had ? "Replace or forget the API key of this tab." : "Enter an API key if this server asks for one.")) {
    route();
  } else if (had && !apiKey()) {
    notify("The API key was forgotten.");
  }
});
onKeyChange(showKeyState);
showKeyState(apiKey());
window.addEventListener("hashchange", route);
route();
