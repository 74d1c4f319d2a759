// The player of a share URL's page. The server rendered every item into #items; this script shows
// one at a time (or a grid), runs the slideshow of playback_prefs, takes keys and swipes, asks
// before showing a sensitive collection, and, when the owner is signed in, follows ui.state and
// player.command live from the player channel. The page's state is mirrored on <body> data
// attributes (current, view, fullscreen, playing, live) for styling and tests.
(() => {
  "use strict";
  const data = JSON.parse(document.getElementById("player-data").textContent);
  const body = document.body;
  const items = Array.from(document.querySelectorAll("#items > li"));
  const thumbs = Array.from(document.querySelectorAll("#strip .thumb"));
  const controls = document.getElementById("controls");
  const strip = document.getElementById("strip");
  const positionLabel = document.getElementById("position");
  body.classList.add("js");

  let current = -1;
  let view = "carousel";
  let playing = false;
  let timer = 0;
  let order = items.map((_, i) => i);

  const mediaOf = (i) => items[i] && items[i].querySelector("video, audio");
  const indexOfMedia = (mediaId) => items.findIndex((li) => Number(li.dataset.mediaId) === Number(mediaId));
  const inSlideshow = (i) => Boolean(data.prefs.kinds[data.items[i].slide_kind]);

  function show(i) {
    if (!items.length) return;
    const next = ((i % items.length) + items.length) % items.length;
    if (next !== current) {
      const before = mediaOf(current);
      if (before && !before.paused) before.pause();
    }
    current = next;
    items.forEach((li, n) => li.classList.toggle("current", n === current));
    thumbs.forEach((b, n) => {
      if (n === current) { b.setAttribute("aria-current", "true"); b.scrollIntoView({ block: "nearest", inline: "nearest" }); } else b.removeAttribute("aria-current");
    });
    positionLabel.textContent = `${current + 1} / ${items.length}`;
    body.dataset.current = items[current].dataset.mediaId;
    history.replaceState(null, "", `#item-${items[current].dataset.mediaId}`);
    if (playing) schedule();
  }

  // ---- slideshow ---------------------------------------------------------------------------

  function shuffled(list) {
    const a = list.slice();
    for (let i = a.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [a[i], a[j]] = [a[j], a[i]];
    }
    return a;
  }

  /** The next item of the slideshow after the current one; -1 at the end without loop. */
  function slideAfter(dir) {
    const pos = order.indexOf(current);
    for (let step = 1; step <= order.length; step++) {
      const at = pos + dir * step;
      if (!data.prefs.loop && (at < 0 || at >= order.length)) return -1;
      const i = order[((at % order.length) + order.length) % order.length];
      if (inSlideshow(i)) return i;
    }
    return -1;
  }

  function advance() {
    const i = slideAfter(1);
    if (i < 0) { pause(); return; }
    show(i);
  }

  function schedule() {
    clearTimeout(timer);
    const media = mediaOf(current);
    if (media && inSlideshow(current)) {
      media.onended = () => { if (playing) advance(); };
      media.play().catch(() => { timer = setTimeout(advance, data.prefs.interval_seconds * 1000); });
      return;
    }
    timer = setTimeout(advance, data.prefs.interval_seconds * 1000);
  }

  function play() {
    if (!items.some((_, i) => inSlideshow(i))) return;
    order = data.prefs.shuffle ? shuffled(items.map((_, i) => i)) : items.map((_, i) => i);
    playing = true;
    body.dataset.playing = "true";
    if (!inSlideshow(current)) { show(slideAfter(1)); return; }
    schedule();
  }

  function pause() {
    playing = false;
    body.dataset.playing = "false";
    clearTimeout(timer);
    const media = mediaOf(current);
    if (media && !media.paused) media.pause();
  }

  // ---- views -------------------------------------------------------------------------------

  function setView(mode) {
    if (mode === "fullscreen") { setFullscreen(true); return; }
    view = mode === "grid" || mode === "list" ? mode : "carousel";
    body.dataset.view = view;
    if (view !== "carousel") setFullscreen(false);
  }

  /** The page's own fullscreen (a layout); the browser's too when a key or click asked for it. */
  function setFullscreen(on, fromUser) {
    body.dataset.fullscreen = on ? "true" : "false";
    if (on && view !== "carousel") { view = "carousel"; body.dataset.view = view; }
    if (fromUser && on && !document.fullscreenElement && document.documentElement.requestFullscreen) {
      document.documentElement.requestFullscreen().catch(() => {});
    }
    if (!on && document.fullscreenElement) document.exitFullscreen().catch(() => {});
  }
  document.addEventListener("fullscreenchange", () => { if (!document.fullscreenElement && body.dataset.fullscreen === "true") body.dataset.fullscreen = "false"; });

  // ---- input -------------------------------------------------------------------------------

  controls.addEventListener("click", (e) => {
    const action = e.target.closest("button") && e.target.closest("button").dataset.action;
    if (action === "previous") show(current - 1);
    else if (action === "next") show(current + 1);
    else if (action === "toggle") (playing ? pause : play)();
    else if (action === "view") setView(view === "grid" ? "carousel" : "grid");
    else if (action === "fullscreen") setFullscreen(body.dataset.fullscreen !== "true", true);
  });
  strip.addEventListener("click", (e) => {
    const b = e.target.closest(".thumb");
    if (b) { show(Number(b.dataset.index)); if (view === "grid") setView("carousel"); }
  });
  document.getElementById("items").addEventListener("click", (e) => {
    if (view !== "grid") return;
    const li = e.target.closest("li.item");
    if (li) { e.preventDefault(); show(Number(li.dataset.index)); setView("carousel"); }
  });
  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || /^(INPUT|TEXTAREA|SELECT)$/.test(e.target.tagName) || body.classList.contains("gated")) return;
    if (e.key === "ArrowRight") { show(current + 1); e.preventDefault(); }
    else if (e.key === "ArrowLeft") { show(current - 1); e.preventDefault(); }
    else if (e.key === " " && !/^(VIDEO|AUDIO|BUTTON|A)$/.test(e.target.tagName)) { (playing ? pause : play)(); e.preventDefault(); }
    else if (e.key === "f" || e.key === "F") setFullscreen(body.dataset.fullscreen !== "true", true);
    else if (e.key === "Escape") { if (body.dataset.fullscreen === "true") setFullscreen(false); else if (view !== "carousel") setView("carousel"); }
  });
  let touch = null;
  const stage = document.getElementById("items");
  stage.addEventListener("touchstart", (e) => { if (e.touches.length === 1) touch = { x: e.touches[0].clientX, y: e.touches[0].clientY }; }, { passive: true });
  stage.addEventListener("touchend", (e) => {
    if (!touch || view !== "carousel") return;
    const dx = e.changedTouches[0].clientX - touch.x;
    const dy = e.changedTouches[0].clientY - touch.y;
    touch = null;
    if (Math.abs(dx) > 50 && Math.abs(dx) > Math.abs(dy) * 1.5) show(current + (dx < 0 ? 1 : -1));
  }, { passive: true });

  // ---- live follow (the signed-in owner) ---------------------------------------------------

  // The item the state last named: a state whose item did not change (a view_mode change, or
  // the current state again after a reconnect) leaves the tab where commands moved it.
  let statedItem = null;
  function applyState(state) {
    if (state.view_mode) setView(state.view_mode);
    const item = `${state.collection_id}/${state.media_id}`;
    if (item === statedItem) return;
    statedItem = item;
    if (state.collection_id !== data.collection_id || state.media_id === null || state.media_id === undefined) return;
    const i = indexOfMedia(state.media_id);
    if (i >= 0) show(i);
  }

  function applyCommand(c) {
    switch (c.command) {
      case "play": play(); break;
      case "pause": pause(); break;
      case "next": show(current + 1); break;
      case "previous": show(current - 1); break;
      case "seek": { const m = mediaOf(current); if (m) m.currentTime = Number(c.position_ms) / 1000; break; }
      case "open": if (c.collection_id === data.collection_id && c.media_id !== undefined) { const i = indexOfMedia(c.media_id); if (i >= 0) show(i); } break;
      case "fullscreen": setFullscreen(c.on !== false); break;
    }
  }

  function follow() {
    const events = new EventSource(data.events_path, { withCredentials: true });
    events.onopen = () => { body.dataset.live = "connected"; };
    events.onerror = () => { body.dataset.live = "reconnecting"; };
    events.addEventListener("ui_state", (e) => applyState(JSON.parse(e.data)));
    events.addEventListener("command", (e) => applyCommand(JSON.parse(e.data)));
  }

  // ---- boot --------------------------------------------------------------------------------

  function start() {
    body.classList.remove("gated");
    if (!items.length) return;
    controls.hidden = false;
    strip.hidden = false;
    const fromHash = /^#item-(\d+)$/.exec(location.hash);
    const at = fromHash ? indexOfMedia(fromHash[1]) : -1;
    show(at >= 0 ? at : 0);
    setView("carousel");
    setFullscreen(Boolean(data.boot_fullscreen));
    if (data.live) follow();
  }

  const gate = document.getElementById("nsfw-gate");
  const acceptedKey = `nsfw-accepted:${data.collection_id}`;
  let accepted = false;
  try { accepted = sessionStorage.getItem(acceptedKey) === "1"; } catch { /* storage off: ask every time */ }
  if (gate && !accepted) {
    body.classList.add("gated");
    document.getElementById("nsfw-accept").addEventListener("click", () => {
      try { sessionStorage.setItem(acceptedKey, "1"); } catch { /* storage off */ }
      gate.remove();
      start();
    });
  } else {
    if (gate) gate.remove();
    start();
  }
})();
