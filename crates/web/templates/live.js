// New mail without a reload: the server says `changed` on /events (server-sent events) after
// every change to this user's mailbox. A list reloads itself (unless the reader is typing in
// the search box); a message page shows a link. Reading works without this script.
//
// A list page names the folder's version it was built from (`data-since`, its highest
// MODSEQ): the stream says `changed` at once if the folder moved on between the page and the
// stream's start, so mail arriving in that gap is not missed. The stream is closed as soon as
// the page is left, so a change the next page itself makes (opening a message marks it read)
// cannot reload this one under the reader's click.
(function () {
  if (!window.EventSource) return;
  var body = document.body;
  var kind = body.getAttribute("data-live");
  if (!kind) return;
  var url = "/events";
  var folder = body.getAttribute("data-folder");
  var since = body.getAttribute("data-since");
  if (kind === "list" && folder !== null && since !== null) {
    url += "?folder=" + encodeURIComponent(folder) + "&since=" + encodeURIComponent(since);
  }
  var source = new EventSource(url);
  var leaving = false;
  function leave() {
    leaving = true;
    if (source.close) source.close();
  }
  window.addEventListener("beforeunload", leave);
  window.addEventListener("pagehide", leave);
  source.addEventListener("changed", function () {
    if (leaving) return;
    if (kind === "list") {
      var active = document.activeElement;
      if (active && active.tagName === "INPUT") return;
      leave();
      window.location.reload();
    } else {
      var notice = document.getElementById("live-notice");
      if (notice) notice.hidden = false;
    }
  });
})();
