//! RFC 4978 COMPRESS=DEFLATE: after login, the client asks once, the server answers in
//! plain and then both sides speak raw DEFLATE (RFC 1951); the shell does the compressing.

use imap_codec::imap_types::extensions::compress::CompressionAlgorithm;

use crate::event::Event;
use crate::session::{Session, Waiting};

pub(crate) fn run(s: &mut Session, tag: &str, algorithm: CompressionAlgorithm) {
    match algorithm {
        CompressionAlgorithm::Deflate => {}
        #[allow(unreachable_patterns)]
        _ => {
            s.tagged(tag, "BAD Unknown compression algorithm");
            return;
        }
    }
    if s.compressed {
        // RFC 4978 3.
        s.tagged(tag, "NO [COMPRESSIONACTIVE] DEFLATE active already");
        return;
    }
    // RFC 4978 3: the client waits for the answer; anything it sent after the command is
    // not trusted to be plain or compressed: dropped, as after STARTTLS.
    s.framer.discard_input();
    let out = std::mem::take(&mut s.out);
    if !out.is_empty() {
        s.events.push_back(Event::Reply(out));
    }
    // The shell decides (`Session::compress_result`), then the answer goes out.
    s.waiting = Some(Waiting::Compress {
        tag: tag.to_string(),
    });
    s.events.push_back(Event::Compress);
}
