/* Live updates for the dashboard's pages (no inline script: the CSP allows only 'self').
 *
 * Connects to the server's WebSocket gateway at /dashboard/ws (the login cookie authenticates;
 * the server checks that this page's Origin is its own), subscribes, and for every event
 * (memory, push, pause, resume, heartbeat) re-reads this page and swaps in the regions marked
 * data-live="<event kinds>" (each with an id). The server renders them for this viewer, so
 * what appears is exactly what a reload would show, permissions included. Reconnects with
 * backoff; the "Live" pill says whether updates flow.
 */
(function () {
  "use strict";
  var state = document.getElementById("live-state");
  var toasts = document.getElementById("live-toasts");
  var pending = {};
  var timer = null;
  var retry = 1000;

  function show(on, text) {
    if (!state) return;
    state.textContent = text;
    state.className = "pill " + (on ? "pill-live" : "pill-off");
    state.setAttribute("data-state", on ? "on" : "off");
  }

  function toast(text) {
    if (!toasts) return;
    var item = document.createElement("div");
    item.className = "toast";
    item.setAttribute("data-testid", "live-toast");
    item.textContent = text; /* text, never HTML: titles are teammates' input */
    toasts.appendChild(item);
    while (toasts.children.length > 3) toasts.removeChild(toasts.firstChild);
    setTimeout(function () { item.remove(); }, 8000);
  }

  function regions(kinds) {
    return Array.prototype.filter.call(document.querySelectorAll("[data-live][id]"), function (el) {
      return el.getAttribute("data-live").split(/\s+/).some(function (k) { return kinds[k]; });
    });
  }

  function refresh() {
    timer = null;
    var kinds = pending;
    pending = {};
    var targets = regions(kinds);
    if (!targets.length) return;
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        targets.forEach(function (el) {
          var next = fresh.getElementById(el.id);
          if (!next || next.innerHTML === el.innerHTML) return;
          var node = document.importNode(next, true);
          node.classList.add("live-flash");
          el.replaceWith(node);
          if (window.htmx) window.htmx.process(node);
        });
        document.body.dispatchEvent(new CustomEvent("engram-live-updated"));
      })
      .catch(function () { /* the next event tries again */ });
  }

  function onEvent(event) {
    if (event.event === "memory") toast("New memory in " + event.project + ": " + (event.title || "(untitled)"));
    if (event.event === "pause") toast("Sync paused for " + event.project);
    if (event.event === "resume") toast("Sync resumed for " + event.project);
    pending[event.event === "overflow" ? "memory" : event.event] = true;
    if (event.event === "overflow") pending.heartbeat = pending.push = pending.pause = true;
    if (!timer) timer = setTimeout(refresh, 50); /* one push brings several events: one re-read */
  }

  function connect() {
    var scheme = location.protocol === "https:" ? "wss:" : "ws:";
    var socket = new WebSocket(scheme + "//" + location.host + "/dashboard/ws");
    socket.onopen = function () { socket.send(JSON.stringify({ token: null })); };
    socket.onmessage = function (message) {
      var data;
      try { data = JSON.parse(message.data); } catch (e) { return; }
      if (data.type === "handshake") {
        socket.send(JSON.stringify({ type: "subscribe" }));
      } else if (data.type === "subscribed") {
        retry = 1000;
        show(true, "Live");
      } else if (data.type === "event") {
        onEvent(data);
      }
    };
    socket.onclose = function () {
      show(false, "Live: reconnecting");
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 30000);
    };
  }

  connect();
})();
