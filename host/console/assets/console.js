// Refreshes the console: fetches the page again every two seconds and swaps
// its <main> in. Without JavaScript the page shows the numbers as of load.
"use strict";
(function () {
  const every = 2000;
  const live = document.getElementById("live");
  async function refresh() {
    try {
      const res = await fetch(location.pathname, { cache: "no-store", headers: { Accept: "text/html" } });
      if (!res.ok) {
        throw new Error("HTTP " + res.status);
      }
      const next = new DOMParser().parseFromString(await res.text(), "text/html");
      const main = next.getElementById("console");
      const at = next.getElementById("at");
      if (main) {
        document.getElementById("console").replaceWith(document.adoptNode(main));
      }
      if (at) {
        live.replaceChildren("Live, updated every 2 s; numbers as of ", document.adoptNode(at), ".");
      }
      live.classList.remove("stale");
    } catch (err) {
      live.textContent = "Not updating (" + err.message + "); retrying.";
      live.classList.add("stale");
    }
    setTimeout(refresh, every);
  }
  setTimeout(refresh, every);
})();
