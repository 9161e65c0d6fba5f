// Live updates: poll this page's JSON twin; when its data changed, fetch the page again and
// swap in its main part (server-rendered and escaped there; no string is turned into markup here).
"use strict";
(function () {
  const body = document.body;
  const api = body.dataset.api;
  if (!api) return;
  const PERIOD_MS = 2000;
  let version = body.dataset.version;
  let busy = false;

  async function refresh() {
    const reply = await fetch(location.pathname + location.search, { headers: { Accept: "text/html" } });
    if (!reply.ok) return;
    const doc = new DOMParser().parseFromString(await reply.text(), "text/html");
    const fresh = doc.getElementById("main");
    if (!fresh) return;
    document.getElementById("main").replaceChildren(...fresh.childNodes);
    body.dataset.updates = String(Number(body.dataset.updates || 0) + 1);
  }

  async function poll() {
    if (busy || document.hidden) return;
    busy = true;
    const live = document.getElementById("live");
    try {
      const reply = await fetch(api, { headers: { Accept: "application/json" } });
      if (!reply.ok) throw new Error("HTTP " + reply.status);
      const page = await reply.json();
      const block = document.getElementById("block");
      if (block) block.textContent = String(page.block);
      if (live) { live.textContent = "live"; live.className = "live"; }
      if (page.version !== version) {
        version = page.version;
        body.dataset.version = version;
        await refresh();
      }
    } catch (err) {
      if (live) { live.textContent = "offline"; live.className = "offline"; }
    } finally {
      busy = false;
    }
  }

  setInterval(poll, PERIOD_MS);
})();
