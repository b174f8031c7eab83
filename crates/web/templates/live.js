// New mail without a reload: the server says `changed` on /events (server-sent events) after
// every change to this user's mailbox. A list reloads itself (unless the reader is typing in
// the search box); a message page shows a link. Reading works without this script.
(function () {
  if (!window.EventSource) return;
  var kind = document.body.getAttribute("data-live");
  if (!kind) return;
  var source = new EventSource("/events");
  source.addEventListener("changed", function () {
    if (kind === "list") {
      var active = document.activeElement;
      if (active && active.tagName === "INPUT") return;
      window.location.reload();
    } else {
      var notice = document.getElementById("live-notice");
      if (notice) notice.hidden = false;
    }
  });
})();
