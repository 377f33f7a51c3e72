// toolgate console: live updates and buttons. Every piece of HTML this
// script inserts was rendered (and escaped) by the gateway's templates;
// data from events is only ever set as text.
(function () {
  'use strict';
  var csrf = document.querySelector('meta[name="csrf-token"]').content;
  var statusEl = document.getElementById('status');
  function say(msg) { if (statusEl) { statusEl.textContent = msg; } }

  // Countdowns: <time data-until="RFC3339">.
  function ticks() {
    var now = Date.now();
    document.querySelectorAll('time[data-until]').forEach(function (t) {
      var s = Math.round((Date.parse(t.dataset.until) - now) / 1000);
      t.textContent = s > 0 ? 'in ' + s + ' s' : 'now';
    });
  }
  setInterval(ticks, 1000);
  ticks();

  // Regions redrawn from a fragment: data-refresh="url" data-every="ms".
  function refresh(el) {
    return fetch(el.dataset.refresh, { credentials: 'same-origin' }).then(function (r) {
      if (!r.ok) { throw new Error(r.status + ' ' + r.statusText); }
      return r.text();
    }).then(function (html) {
      if (el.contains(document.activeElement)) { return; } // keep keyboard focus
      el.innerHTML = html;
      ticks();
    }).catch(function (e) { say('Refresh failed: ' + e.message); });
  }
  document.querySelectorAll('[data-refresh]').forEach(function (el) {
    var every = parseInt(el.dataset.every || '5000', 10);
    setInterval(function () { if (!document.hidden) { refresh(el); } }, every);
  });

  // Buttons: POST with the CSRF token, answer in the status line.
  document.addEventListener('submit', function (ev) {
    var form = ev.target;
    if (!form.hasAttribute('data-post')) { return; }
    ev.preventDefault();
    var button = form.querySelector('button');
    if (button) { button.disabled = true; }
    say('Working…');
    fetch(form.action, {
      method: 'POST', credentials: 'same-origin',
      headers: { 'X-CSRF-Token': csrf, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(new FormData(form)).toString()
    }).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) { throw new Error(body.error || r.statusText); }
        say(body.message || 'Done.');
        if (form.hasAttribute('data-reload')) {
          location.assign(location.pathname + '?done=' + encodeURIComponent(body.message || 'Done.'));
          return;
        }
        document.querySelectorAll('[data-refresh]').forEach(refresh);
      });
    }).catch(function (e) {
      say('Failed: ' + e.message);
    }).finally(function () { if (button) { button.disabled = false; } });
  });

  // Live lists: <ol data-stream="url">, fed by Server-Sent Events.
  var list = document.querySelector('[data-stream]');
  if (!list) { return; }
  var state = document.querySelector('[data-live-state]');
  var maxRows = 500;
  var source = null;
  function lastID() {
    var first = list.querySelector('li[data-id]');
    return first ? first.dataset.id : '0';
  }
  function connect(url) {
    if (source) { source.close(); }
    var sep = url.indexOf('?') < 0 ? '?' : '&';
    source = new EventSource(url + sep + 'after=' + lastID());
    source.onopen = function () { if (state) { state.textContent = 'Live'; } };
    source.onerror = function () { if (state) { state.textContent = 'Reconnecting…'; } };
    source.addEventListener('event', function (m) {
      var msg = JSON.parse(m.data);
      if (list.querySelector('li[data-id="' + msg.event.id + '"]')) { return; }
      list.insertAdjacentHTML('afterbegin', msg.html);
      var empty = document.querySelector('.empty');
      if (empty) { empty.remove(); }
      while (list.children.length > maxRows) { list.lastElementChild.remove(); }
    });
  }
  connect(list.dataset.stream);
  var filters = document.querySelector('form[data-filters]');
  if (filters) {
    filters.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var q = new URLSearchParams(new FormData(filters));
      Array.from(q.keys()).forEach(function (k) { if (!q.get(k)) { q.delete(k); } });
      history.replaceState(null, '', location.pathname + (q.toString() ? '?' + q : ''));
      list.innerHTML = '';
      connect(list.dataset.stream.split('?')[0] + '?' + q.toString());
    });
  }
})();
