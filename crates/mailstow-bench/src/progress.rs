//! A progress bar for `sim validate` (the same as `mailstow`'s for its long admin runs).

use indicatif::{ProgressBar, ProgressStyle};

/// Runs `work` with a progress bar on stderr (invisible when stderr is not a terminal); `work`
/// reports `(done, total)` through the callback it is given.
pub(crate) fn with_progress<T>(label: &str, work: impl FnOnce(&mut dyn FnMut(u64, u64)) -> T) -> T {
    let bar = ProgressBar::new(0);
    if let Ok(style) =
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} {elapsed_precise} eta {eta}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(label.to_string());
    let result = work(&mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    result
}
