//! The web view in a real browser (issue 21): headless Chromium driven by Selenium
//! (`tests/e2e/web_browser.py`, Debian's `chromium`, `chromium-driver` and `python3-selenium`,
//! which `scripts/test.sh` installs) against the real binary: logging in, new mail showing up
//! without a reload, reading, downloading, replying with a file, moving, deleting, searching,
//! hostile HTML, CSRF, another user's mail, the admin pages, and the Rules page. Screenshots of
//! the pages go to `target/web-screenshots`. Server bugs the script meets on the way fail the
//! test at the end, after every part has run (its `BUG` lines).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Server, script, set_up_data_dir};

/// Debian's interpreter: `python3-selenium` is installed for it (a `python3` earlier on the
/// PATH, such as pyenv's, does not see it).
const PYTHON: &str = "/usr/bin/python3";
/// The whole script, browser start and every wait included, ends within this.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(180);

/// Fails (never skips) when the browser or its driver is missing.
fn require_browser() {
    for (path, package) in [
        ("/usr/bin/chromium", "chromium"),
        ("/usr/bin/chromedriver", "chromium-driver"),
        (PYTHON, "python3"),
    ] {
        assert!(
            Path::new(path).exists(),
            "{path} is missing: install the Debian package `{package}` (scripts/test.sh does)"
        );
    }
    let selenium = Command::new(PYTHON)
        .args(["-c", "import selenium"])
        .output()
        .expect("python3");
    assert!(
        selenium.status.success(),
        "{PYTHON} cannot import selenium: install the Debian package `python3-selenium` \
         (scripts/test.sh does)\n{}",
        String::from_utf8_lossy(&selenium.stderr)
    );
}

fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/web-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot directory");
    dir
}

/// Runs `web_browser.py` with `flag` against a fresh server; fails with everything it printed.
fn run_browser_script(flag: &str) {
    require_browser();
    let (_dir, data) = set_up_data_dir();
    let server = Server::start(&data);
    let started = Instant::now();
    let mut child = Command::new(PYTHON)
        .arg(script("web_browser.py"))
        .arg(server.addr("web"))
        .arg(server.addr("smtp"))
        .arg(server.addr("imap"))
        .arg(screenshot_dir())
        .arg(env!("CARGO_BIN_EXE_mailstow"))
        .arg(&data)
        .arg(server.addr("submission"))
        .arg(flag)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let (stdout, stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let (stdout, stderr) = (read(Box::new(stdout)), read(Box::new(stderr)));
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if started.elapsed() > SCRIPT_DEADLINE {
            // SIGTERM: the script quits its browsers on the way out.
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            std::thread::sleep(Duration::from_secs(5));
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    eprintln!(
        "web_browser.py {flag}: {:.1} s\n{stdout}",
        started.elapsed().as_secs_f64()
    );
    assert!(
        status.is_some_and(|s| s.success()),
        "web_browser.py {flag}: {}\n{stderr}",
        match status {
            Some(s) => s.to_string(),
            None => format!("still running after {SCRIPT_DEADLINE:?}"),
        }
    );
    server.stop_cleanly();
}

/// Everything a user does, in Chromium: parts a to i and l of the script.
#[test]
fn a_user_works_with_mail_in_chromium() {
    run_browser_script("--no-admin");
}

/// The admin pages in Chromium: a user is refused them (403), an admin adds a user who
/// then logs in (parts j and k of the script).
#[test]
fn an_admin_adds_a_user_in_chromium() {
    run_browser_script("--admin");
}

/// The Rules page in Chromium (part m of the script): a rule "Subject contains invoice: move
/// to Invoices (created)" and an out-of-office reply from today, made with the form; the
/// script `mailstow sieve get` shows has their commands, and the page shows them again after
/// a reload.
#[test]
fn a_user_makes_rules_and_an_out_of_office_reply_in_chromium() {
    run_browser_script("--rules");
}

/// The rule of part m files mail: a message with the subject "invoice 42", sent over SMTP,
/// is in the Invoices folder over IMAP (part n).
#[test]
fn mail_is_filed_by_a_rule_made_in_chromium() {
    run_browser_script("--rules-delivery");
}
