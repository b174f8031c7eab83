//! The routes over an in-memory backend, through the router (no socket: the server's
//! integration tests drive a real one).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::Request;
use tower::ServiceExt as _;

use super::*;
use crate::app::COOKIE;

/// (uid, content, seen, flagged)
type Message = (u32, Vec<u8>, bool, bool);
/// (user, recipients, message)
type Sent = (String, Vec<String>, Vec<u8>);

struct Memory {
    /// (user, folder) -> messages
    folders: Mutex<HashMap<(String, String), Vec<Message>>>,
    /// What `send` was given.
    sent: Mutex<Vec<Sent>>,
    changed: tokio::sync::watch::Sender<u64>,
    ended: tokio::sync::watch::Sender<bool>,
    /// The admins, and the users the admin pages list.
    admins: Mutex<Vec<String>>,
    users: Mutex<Vec<String>>,
    /// What `admin_act` was asked, by whom.
    acted: Mutex<Vec<(String, AdminAction)>>,
    /// Users deleted since they logged in.
    gone: Mutex<Vec<String>>,
    /// (user, name) -> (source, active)
    scripts: Mutex<std::collections::BTreeMap<(String, String), (String, bool)>>,
    /// What the reports page shows.
    reports: Mutex<AdminReports>,
}

/// An organization name a hostile report could carry.
const HOSTILE_ORG: &str = "<script>alert(1)</script> & Co";

impl Default for Memory {
    fn default() -> Memory {
        Memory {
            admins: Mutex::new(vec!["root@example.org".into()]),
            users: Mutex::new(vec!["ann@example.org".into(), "root@example.org".into()]),
            acted: Mutex::default(),
            gone: Mutex::default(),
            scripts: Mutex::default(),
            reports: Mutex::new(AdminReports {
                received: vec![AdminReceivedReport {
                    id: 7,
                    kind: AdminReportKind::TlsRpt,
                    org: HOSTILE_ORG.into(),
                    report_id: "r\"1".into(),
                    domain: "example.org".into(),
                    begin: 1_764_028_800,
                    end: 1_764_115_199,
                    total: 120,
                    failed: 3,
                }],
                received_more: false,
                sent: vec![AdminSentReport {
                    kind: AdminReportKind::Dmarc,
                    domain: "example.net".into(),
                    day: 1_764_028_800,
                    recipients: vec!["dmarc@example.net".into()],
                    sent_at: 1_764_118_800,
                }],
                sent_more: false,
                certificate: AdminCertificate::Configured,
            }),
            folders: Mutex::default(),
            sent: Mutex::default(),
            changed: tokio::sync::watch::channel(0).0,
            ended: tokio::sync::watch::channel(false).0,
        }
    }
}

impl Memory {
    fn add(&self, user: &str, folder: &str, uid: u32, content: &str) {
        self.folders
            .lock()
            .unwrap()
            .entry((user.into(), folder.into()))
            .or_default()
            .push((
                uid,
                content.replace('\n', "\r\n").into_bytes(),
                false,
                false,
            ));
    }
}

impl Backend for Memory {
    async fn login(&self, username: &str, password: &str, _: IpAddr) -> Result<String, LoginError> {
        match (username, password) {
            ("ann@example.org" | "bob@example.org" | "root@example.org", "right") => {
                Ok(username.into())
            }
            ("slow@example.org", _) => Err(LoginError::Temporary("throttled".into())),
            _ => Err(LoginError::BadCredentials),
        }
    }

    fn logout(&self, _: &str, _: IpAddr) {}

    async fn account(&self, user: &str) -> Result<Account, BackendError> {
        Ok(Account {
            address: user.into(),
            used_bytes: 3 << 20,
            used_messages: 4,
            quota_bytes: Some(12 << 20),
            quota_messages: None,
            last_login_at: Some(1_764_079_200),
            logins: vec![LoginRow {
                client: "203.0.113.7".into(),
                protocol: "imap".into(),
                result: "failed".into(),
                attempts: 3,
                first_at: 1_764_079_000,
                last_at: 1_764_079_100,
            }],
        })
    }

    async fn change_password(
        &self,
        _: &str,
        current: &str,
        new: &str,
        _: IpAddr,
    ) -> Result<(), PasswordError> {
        match (current, new) {
            ("right", "") => Err(PasswordError::Refused("password is empty".into())),
            ("right", _) => Ok(()),
            _ => Err(PasswordError::WrongPassword),
        }
    }

    fn folders(&self, user: &str) -> Result<Vec<FolderInfo>, BackendError> {
        let map = self.folders.lock().unwrap();
        let mut out: Vec<FolderInfo> = map
            .iter()
            .filter(|((u, _), _)| u == user)
            .map(|((_, f), m)| FolderInfo {
                name: f.clone(),
                total: m.len() as u64,
                unseen: m.iter().filter(|x| !x.2).count() as u64,
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn page(
        &self,
        user: &str,
        folder: &str,
        before: Option<u32>,
        count: usize,
    ) -> Result<FolderPage, BackendError> {
        let map = self.folders.lock().unwrap();
        let m = map
            .get(&(user.into(), folder.into()))
            .ok_or(BackendError::NotFound)?;
        let messages = m
            .iter()
            .rev()
            .filter(|x| before.is_none_or(|b| x.0 < b))
            .take(count)
            .map(|(uid, content, seen, flagged)| {
                let text = String::from_utf8_lossy(content);
                let subject = text
                    .lines()
                    .find_map(|l| l.strip_prefix("Subject: "))
                    .unwrap_or("")
                    .to_string();
                Listed {
                    uid: *uid,
                    received_at: 1_764_000_000,
                    size: content.len() as u64,
                    from: "sender@example.net".into(),
                    to: user.into(),
                    subject,
                    sent_at: String::new(),
                    has_attachment: false,
                    preview: format!("preview of {uid}"),
                    seen: *seen,
                    flagged: *flagged,
                }
            })
            .collect();
        Ok(FolderPage {
            version: 7,
            total: m.len() as u64,
            unseen: m.iter().filter(|x| !x.2).count() as u64,
            messages,
        })
    }

    fn message(&self, user: &str, folder: &str, uid: u32) -> Result<Stored, BackendError> {
        let map = self.folders.lock().unwrap();
        let m = map
            .get(&(user.into(), folder.into()))
            .ok_or(BackendError::NotFound)?;
        let (_, content, seen, flagged) = m
            .iter()
            .find(|x| x.0 == uid)
            .ok_or(BackendError::NotFound)?;
        Ok(Stored {
            content: content.clone(),
            seen: *seen,
            flagged: *flagged,
        })
    }

    fn set_flag(
        &self,
        user: &str,
        folder: &str,
        uid: u32,
        flag: Flag,
        on: bool,
    ) -> Result<(), BackendError> {
        let mut map = self.folders.lock().unwrap();
        let m = map
            .get_mut(&(user.into(), folder.into()))
            .ok_or(BackendError::NotFound)?;
        let x = m
            .iter_mut()
            .find(|x| x.0 == uid)
            .ok_or(BackendError::NotFound)?;
        match flag {
            Flag::Seen => x.2 = on,
            Flag::Flagged => x.3 = on,
        }
        Ok(())
    }

    fn move_to(&self, user: &str, folder: &str, uid: u32, dest: &str) -> Result<(), BackendError> {
        let mut map = self.folders.lock().unwrap();
        if dest != TRASH && !map.contains_key(&(user.into(), dest.into())) {
            return Err(BackendError::NotFound);
        }
        let m = map
            .get_mut(&(user.into(), folder.into()))
            .ok_or(BackendError::NotFound)?;
        let at = m
            .iter()
            .position(|x| x.0 == uid)
            .ok_or(BackendError::NotFound)?;
        let moved = m.remove(at);
        let target = map.entry((user.into(), dest.into())).or_default();
        let next = target.iter().map(|x| x.0).max().unwrap_or(0) + 1;
        target.push((next, moved.1, moved.2, moved.3));
        Ok(())
    }

    async fn send(
        &self,
        user: &str,
        recipients: &[String],
        message: Vec<u8>,
        _: IpAddr,
    ) -> Result<(), SendError> {
        if recipients.iter().any(|r| r.ends_with("@nowhere.example")) {
            return Err(SendError::Recipient("no such user".into()));
        }
        self.sent
            .lock()
            .unwrap()
            .push((user.into(), recipients.to_vec(), message));
        Ok(())
    }

    fn changes(&self, _: &str) -> Result<Changes, BackendError> {
        Ok(Changes {
            changed: self.changed.subscribe(),
            ended: self.ended.subscribe(),
            guard: Box::new(()),
        })
    }

    fn expunge(&self, user: &str, folder: &str, uid: u32) -> Result<(), BackendError> {
        let mut map = self.folders.lock().unwrap();
        let m = map
            .get_mut(&(user.into(), folder.into()))
            .ok_or(BackendError::NotFound)?;
        let at = m
            .iter()
            .position(|x| x.0 == uid)
            .ok_or(BackendError::NotFound)?;
        m.remove(at);
        Ok(())
    }

    fn expunge_all(&self, user: &str, folder: &str) -> Result<(), BackendError> {
        let mut map = self.folders.lock().unwrap();
        map.get_mut(&(user.into(), folder.into()))
            .ok_or(BackendError::NotFound)?
            .clear();
        Ok(())
    }

    fn search(
        &self,
        user: &str,
        folder: &str,
        query: &str,
        count: usize,
        _: usize,
    ) -> Result<(FolderPage, bool), BackendError> {
        let mut page = self.page(user, folder, None, usize::MAX)?;
        let map = self.folders.lock().unwrap();
        let m = &map[&(user.to_string(), folder.to_string())];
        page.messages.retain(|l| {
            m.iter().any(|x| {
                x.0 == l.uid
                    && String::from_utf8_lossy(&x.1)
                        .to_lowercase()
                        .contains(&query.to_lowercase())
            })
        });
        page.messages.truncate(count);
        Ok((page, false))
    }

    fn is_user(&self, user: &str) -> bool {
        !self.gone.lock().unwrap().iter().any(|g| g == user)
    }

    fn is_admin(&self, user: &str) -> bool {
        self.admins.lock().unwrap().iter().any(|a| a == user)
    }

    fn serves_domain(&self, domain: &str) -> bool {
        domain == "example.org"
    }

    async fn sieve_scripts(&self, user: &str) -> Result<Vec<ScriptInfo>, BackendError> {
        Ok(self
            .scripts
            .lock()
            .unwrap()
            .iter()
            .filter(|((u, _), _)| u == user)
            .map(|((_, name), (source, active))| ScriptInfo {
                name: name.clone(),
                active: *active,
                bytes: source.len(),
            })
            .collect())
    }

    async fn sieve_script(&self, user: &str, name: &str) -> Result<String, BackendError> {
        self.scripts
            .lock()
            .unwrap()
            .get(&(user.into(), name.into()))
            .map(|(source, _)| source.clone())
            .ok_or(BackendError::NotFound)
    }

    /// Refuses a script containing `syntax error` (the real interpreter's place).
    async fn sieve_save(
        &self,
        user: &str,
        name: &str,
        source: &str,
        activate: bool,
    ) -> Result<(), ScriptError> {
        if let Some(at) = source.lines().position(|l| l.contains("syntax error")) {
            return Err(ScriptError::Invalid {
                line: at as u32 + 1,
                column: 1,
                message: "unexpected syntax error".into(),
            });
        }
        {
            let mut scripts = self.scripts.lock().unwrap();
            let active = scripts
                .get(&(user.into(), name.into()))
                .is_some_and(|s| s.1);
            scripts.insert((user.into(), name.into()), (source.into(), active));
        }
        if activate {
            self.sieve_activate(user, Some(name)).await?;
        }
        Ok(())
    }

    async fn sieve_activate(&self, user: &str, name: Option<&str>) -> Result<(), ScriptError> {
        let mut scripts = self.scripts.lock().unwrap();
        if let Some(name) = name
            && !scripts.contains_key(&(user.into(), name.into()))
        {
            return Err(ScriptError::Backend(BackendError::NotFound));
        }
        for ((u, n), (_, active)) in scripts.iter_mut() {
            if u == user {
                *active = Some(n.as_str()) == name;
            }
        }
        Ok(())
    }

    async fn sieve_delete(&self, user: &str, name: &str) -> Result<(), ScriptError> {
        let mut scripts = self.scripts.lock().unwrap();
        match scripts.get(&(user.into(), name.into())) {
            None => Err(ScriptError::Backend(BackendError::NotFound)),
            Some((_, true)) => Err(ScriptError::Refused(format!(
                "Sieve script {name} is active; deactivate it first"
            ))),
            Some(_) => {
                scripts.remove(&(user.into(), name.into()));
                Ok(())
            }
        }
    }

    async fn admin_data(&self, what: AdminView) -> Result<AdminData, BackendError> {
        Ok(match what {
            AdminView::Users(filter) => {
                let users: Vec<AdminUser> = self
                    .users
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|u| u.contains(&filter))
                    .map(|u| AdminUser {
                        address: u.clone(),
                        quota_bytes: None,
                        used_bytes: Some(10),
                        messages: Some(1),
                        last_login_at: None,
                        admin: self.is_admin(u),
                        node: None,
                    })
                    .collect();
                let matched = users.len();
                AdminData::Users(users, matched)
            }
            AdminView::Queue => AdminData::Queue(vec![Queued {
                id: 42,
                sender: "<script>@example.org".into(),
                recipients: vec!["far@example.net".into()],
                size: 2048,
                queued_at: 1_764_079_000,
                attempts: 2,
                last_error: Some("451 try later".into()),
            }]),
            AdminView::Queued(42) => AdminData::Queued("id: 42\n".into()),
            AdminView::Queued(_) => return Err(BackendError::NotFound),
            AdminView::Counters => {
                AdminData::Counters(vec![("mailstow_accepted_total".into(), "7".into())])
            }
            AdminView::Domains => AdminData::Domains(vec!["example.org".into()]),
            AdminView::Aliases => AdminData::Aliases(vec![]),
            AdminView::Reports => AdminData::Reports(self.reports.lock().unwrap().clone()),
            AdminView::Report(7) => AdminData::Report(format!("id: 7\nfrom: {HOSTILE_ORG}\n")),
            AdminView::Report(_) => return Err(BackendError::NotFound),
            AdminView::Overview => AdminData::Overview {
                node: "here".into(),
                domains: 1,
                users: 2,
                aliases: 0,
                queued: 1,
            },
        })
    }

    async fn admin_act(
        &self,
        admin: &str,
        _: IpAddr,
        action: AdminAction,
    ) -> Result<String, String> {
        self.acted
            .lock()
            .unwrap()
            .push((admin.to_string(), action.clone()));
        match action {
            AdminAction::AddUser { address, .. } => {
                self.users.lock().unwrap().push(address.clone());
                Ok(format!("user added: {address}"))
            }
            AdminAction::DeleteDomain(d) => Err(format!("domain {d} still has users")),
            other => Ok(other.describe()),
        }
    }
}

struct Browser {
    router: Router,
    cookie: Option<String>,
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Browser {
    fn new(memory: Arc<Memory>) -> Browser {
        let config = Config {
            page_size: 2,
            ..Config::default()
        };
        Browser {
            router: router(memory, config)
                .layer(MockConnectInfo(SocketAddr::from(([127, 0, 0, 1], 5555)))),
            cookie: None,
        }
    }

    async fn send(&mut self, method: &str, uri: &str, form: Option<&str>) -> Answer {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(c) = &self.cookie {
            request = request.header(header::COOKIE, format!("{COOKIE}={c}"));
        }
        let request = match form {
            Some(f) => request
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(f.to_string())),
            None => request.body(Body::empty()),
        }
        .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        Answer {
            status,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    async fn log_in(&mut self, user: &str) -> Answer {
        let a = self
            .send(
                "POST",
                "/login",
                Some(&format!(
                    "username={}&password=right",
                    user.replace('@', "%40")
                )),
            )
            .await;
        if let Some(set) = a.headers.get(header::SET_COOKIE) {
            let set = set.to_str().unwrap();
            self.cookie = set
                .split(';')
                .next()
                .and_then(|c| c.strip_prefix(&format!("{COOKIE}=")))
                .map(str::to_string);
        }
        a
    }

    /// The CSRF token of the page at `uri`.
    async fn csrf(&mut self, uri: &str) -> String {
        let page = self.send("GET", uri, None).await.body;
        page.split("name=\"csrf\" value=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .expect("a csrf field")
            .to_string()
    }
}

fn mailbox() -> Arc<Memory> {
    let m = Memory::default();
    for uid in 1..=3 {
        m.add(
            "ann@example.org",
            "INBOX",
            uid,
            &format!("From: x@example.net\nSubject: Hello {uid} <b>\n\nBody {uid}\n"),
        );
    }
    m.add(
        "ann@example.org",
        "INBOX",
        4,
        "From: x@example.net\nSubject: html\nContent-Type: text/html\n\n\
         <p onmouseover=\"steal()\">Hi<script>alert(1)</script><img src=\"https://t.example/x.gif\"></p>\n",
    );
    m.add("bob@example.org", "INBOX", 7, "Subject: bob's\n\nsecret\n");
    Arc::new(m)
}

#[tokio::test]
async fn login_is_required_and_the_cookie_is_strict() {
    let mut b = Browser::new(mailbox());
    let a = b.send("GET", "/mail", None).await;
    assert_eq!(a.status, StatusCode::SEE_OTHER);
    assert_eq!(a.headers[header::LOCATION], "/login");
    let a = b
        .send(
            "POST",
            "/login",
            Some("username=ann%40example.org&password=wrong"),
        )
        .await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert!(a.body.contains("Wrong address or password."), "{}", a.body);
    assert!(a.headers.get(header::SET_COOKIE).is_none());
    let a = b
        .send(
            "POST",
            "/login",
            Some("username=slow%40example.org&password=x"),
        )
        .await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    let a = b.log_in("ann@example.org").await;
    assert_eq!(a.status, StatusCode::SEE_OTHER);
    let cookie = a.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(
        a.headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("default-src 'none'")
    );
}

#[tokio::test]
async fn the_list_pages_newest_first_and_escapes() {
    let mut b = Browser::new(mailbox());
    b.log_in("ann@example.org").await;
    let a = b.send("GET", "/mail", None).await;
    assert_eq!(a.status, StatusCode::OK);
    // Newest first, two a page.
    let html_at = a.body.find(">html<").expect("message 4");
    let three_at = a.body.find("Hello 3").expect("message 3");
    assert!(html_at < three_at);
    assert!(!a.body.contains("Hello 2"));
    assert!(
        a.body.contains("Hello 3 &#60;b&#62;") || a.body.contains("Hello 3 &lt;b&gt;"),
        "escaped"
    );
    assert!(a.body.contains("preview of 3"));
    assert!(a.body.contains("4 messages, 4 unread"));
    let older = a
        .body
        .split("rel=\"next\"")
        .next()
        .and_then(|s| s.rsplit("href=\"").next())
        .and_then(|s| s.split('"').next())
        .unwrap()
        .replace("&amp;", "&")
        .replace("&#38;", "&");
    assert_eq!(older, "/mail?folder=INBOX&before=3");
    let a = b.send("GET", &older, None).await;
    assert!(
        a.body.contains("Hello 2") && a.body.contains("Hello 1") && !a.body.contains("Hello 3")
    );
}

#[tokio::test]
async fn another_users_message_is_not_found_and_html_is_cleaned() {
    let mut b = Browser::new(mailbox());
    b.log_in("ann@example.org").await;
    let a = b.send("GET", "/message?folder=INBOX&uid=7", None).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(!a.body.contains("secret"));
    let a = b.send("GET", "/message?folder=INBOX&uid=4", None).await;
    assert_eq!(a.status, StatusCode::OK);
    for bad in ["alert(1)", "onmouseover", "t.example"] {
        assert!(!a.body.contains(bad), "{bad} in {}", a.body);
    }
    // The only script is the page's own.
    assert_eq!(a.body.matches("<script").count(), 1);
    assert!(a.body.contains("<script src=\"/live.js\" defer>"));
    assert!(
        a.body
            .contains("Remote images in this message were not loaded.")
    );
    // Opened: read.
    let list = b.send("GET", "/mail", None).await;
    assert!(list.body.contains("4 messages, 3 unread"), "{}", list.body);
}

#[tokio::test]
async fn forms_need_the_sessions_csrf_token() {
    let mut b = Browser::new(mailbox());
    b.log_in("ann@example.org").await;
    let forged = b
        .send(
            "POST",
            "/message/flag",
            Some("folder=INBOX&uid=1&flag=flagged&on=1"),
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    let wrong = b
        .send(
            "POST",
            "/message/flag",
            Some("csrf=00&folder=INBOX&uid=1&flag=flagged&on=1"),
        )
        .await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    let csrf = b.csrf("/message?folder=INBOX&uid=1").await;
    let ok = b
        .send(
            "POST",
            "/message/flag",
            Some(&format!("csrf={csrf}&folder=INBOX&uid=1&flag=flagged&on=1")),
        )
        .await;
    assert_eq!(ok.status, StatusCode::SEE_OTHER);
    assert!(
        b.send("GET", "/mail?folder=INBOX&before=2", None)
            .await
            .body
            .contains("flagged")
    );
    // Another user's message through the form: not found, nothing changed.
    let other = b
        .send(
            "POST",
            "/message/flag",
            Some(&format!("csrf={csrf}&folder=INBOX&uid=7&flag=flagged&on=1")),
        )
        .await;
    assert_eq!(other.status, StatusCode::NOT_FOUND);
    // Logged out: the cookie no longer works.
    let out = b
        .send("POST", "/logout", Some(&format!("csrf={csrf}")))
        .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(
        b.send("GET", "/mail", None).await.status,
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn delete_moves_to_the_trash_which_empties_and_search_finds_text() {
    let mut b = Browser::new(mailbox());
    b.log_in("ann@example.org").await;
    let csrf = b.csrf("/message?folder=INBOX&uid=2").await;
    let found = b.send("GET", "/search?folder=INBOX&q=body%202", None).await;
    assert_eq!(found.status, StatusCode::OK);
    assert!(
        found.body.contains("Hello 2") && !found.body.contains("Hello 3"),
        "{}",
        found.body
    );
    assert!(found.body.contains("1 found for"), "{}", found.body);
    let forged = b
        .send("POST", "/message/delete", Some("folder=INBOX&uid=2"))
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    let deleted = b
        .send(
            "POST",
            "/message/delete",
            Some(&format!("csrf={csrf}&folder=INBOX&uid=2")),
        )
        .await;
    assert_eq!(deleted.status, StatusCode::SEE_OTHER);
    let inbox = b.send("GET", "/mail?folder=INBOX&before=3", None).await;
    assert!(!inbox.body.contains("Hello 2") && inbox.body.contains("Hello 1"));
    let trash = b.send("GET", "/mail?folder=Trash", None).await;
    assert!(trash.body.contains("Hello 2") && trash.body.contains("Empty Trash"));
    // Only the Trash empties.
    let refused = b
        .send(
            "POST",
            "/folder/empty",
            Some(&format!("csrf={csrf}&folder=INBOX")),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    let emptied = b
        .send(
            "POST",
            "/folder/empty",
            Some(&format!("csrf={csrf}&folder=Trash")),
        )
        .await;
    assert_eq!(emptied.status, StatusCode::SEE_OTHER);
    assert!(
        b.send("GET", "/mail?folder=Trash", None)
            .await
            .body
            .contains("No messages.")
    );
    // Moving to a folder that is not there: not found, the message stays.
    let lost = b
        .send(
            "POST",
            "/message/move",
            Some(&format!("csrf={csrf}&folder=INBOX&uid=1&dest=Nowhere")),
        )
        .await;
    assert_eq!(lost.status, StatusCode::NOT_FOUND);
    assert!(
        b.send("GET", "/mail?folder=INBOX&before=2", None)
            .await
            .body
            .contains("Hello 1")
    );
}

/// `/events` says `changed` for every change and ends with the user.
#[tokio::test]
async fn events_follow_the_mailbox_until_the_user_ends() {
    use futures_util::StreamExt as _;
    let memory = mailbox();
    let mut b = Browser::new(memory.clone());
    b.log_in("ann@example.org").await;
    let request = Request::builder()
        .uri("/events")
        .header(
            header::COOKIE,
            format!("{COOKIE}={}", b.cookie.clone().unwrap()),
        )
        .body(Body::empty())
        .unwrap();
    let response = b.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    let mut body = response.into_body().into_data_stream();
    memory.changed.send_modify(|n| *n += 1);
    let chunk = tokio::time::timeout(Duration::from_secs(5), body.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&chunk);
    assert!(text.contains("event: changed"), "{text}");
    memory.ended.send_replace(true);
    let end = tokio::time::timeout(Duration::from_secs(5), body.next())
        .await
        .unwrap();
    assert!(end.is_none(), "the stream ended");
    // Without a session: sent to log in.
    let mut stranger = Browser::new(memory);
    assert_eq!(
        stranger.send("GET", "/events", None).await.status,
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn the_account_page_shows_usage_and_changes_the_password() {
    let memory = mailbox();
    let mut other = Browser::new(memory.clone());
    let mut b = Browser {
        router: other.router.clone(),
        cookie: None,
    };
    other.log_in("ann@example.org").await;
    b.log_in("ann@example.org").await;
    let page = b.send("GET", "/account", None).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains("3.0 MiB") && page.body.contains("25% used"),
        "{}",
        page.body
    );
    assert!(page.body.contains("2025-11-25 14:00 UTC"), "{}", page.body);
    let csrf = b.csrf("/account").await;
    let forged = b
        .send(
            "POST",
            "/account/password",
            Some("current=right&new=n&again=n"),
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    let differ = b
        .send(
            "POST",
            "/account/password",
            Some(&format!("csrf={csrf}&current=right&new=a&again=b")),
        )
        .await;
    assert_eq!(differ.status, StatusCode::BAD_REQUEST);
    assert!(differ.body.contains("The new passwords differ."));
    let wrong = b
        .send(
            "POST",
            "/account/password",
            Some(&format!("csrf={csrf}&current=nope&new=a&again=a")),
        )
        .await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    assert!(wrong.body.contains("The current password is wrong."));
    let done = b
        .send(
            "POST",
            "/account/password",
            Some(&format!("csrf={csrf}&current=right&new=new&again=new")),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK);
    assert!(done.body.contains("Your password was changed."));
    // This session goes on; the other one has ended.
    assert_eq!(b.send("GET", "/mail", None).await.status, StatusCode::OK);
    assert_eq!(
        other.send("GET", "/mail", None).await.status,
        StatusCode::SEE_OTHER
    );
}

/// A multipart form as a browser sends it: `fields` in order, then files.
fn multipart(fields: &[(&str, &str)], files: &[(&str, &str, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "XyZzY0123456789";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    for (file, ctype, bytes) in files {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"attachment\"; filename=\"{file}\"\r\nContent-Type: {ctype}\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

impl Browser {
    async fn post_multipart(&mut self, uri: &str, form: (String, Vec<u8>)) -> Answer {
        let request = Request::builder()
            .method("POST")
            .uri(uri)
            .header(
                header::COOKIE,
                format!("{COOKIE}={}", self.cookie.clone().unwrap()),
            )
            .header(header::CONTENT_TYPE, form.0)
            .body(Body::from(form.1))
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        Answer {
            status,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }
}

#[tokio::test]
async fn a_reply_with_a_file_is_built_and_sent() {
    let memory = mailbox();
    let mut b = Browser::new(memory.clone());
    b.log_in("ann@example.org").await;
    let form = b
        .send("GET", "/compose?folder=INBOX&uid=1&mode=reply", None)
        .await;
    assert_eq!(form.status, StatusCode::OK);
    assert!(
        form.body.contains("value=\"x@example.net\""),
        "{}",
        form.body
    );
    assert!(form.body.contains("Re: Hello 1"));
    let csrf = b.csrf("/compose").await;
    // The token must come first: a forged upload is refused before its files are read.
    let forged = b
        .post_multipart(
            "/compose",
            multipart(&[("to", "x@example.net"), ("csrf", &csrf)], &[]),
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    let bad = b
        .post_multipart(
            "/compose",
            multipart(
                &[("csrf", &csrf), ("to", "not an address"), ("subject", "s")],
                &[],
            ),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.body.contains("is not an address"), "{}", bad.body);
    let sent = b
        .post_multipart(
            "/compose",
            multipart(
                &[
                    ("csrf", &csrf),
                    ("to", "x@example.net"),
                    ("cc", "Cy <cy@example.net>"),
                    ("subject", "Re: Hello 1\r\nBcc: evil@example.net"),
                    ("body", "Thanks!"),
                    ("in_reply_to", "1@test"),
                    ("references", "<0@test> <1@test>"),
                ],
                &[("notes.txt", "text/plain", b"file body")],
            ),
        )
        .await;
    assert_eq!(sent.status, StatusCode::SEE_OTHER, "{}", sent.body);
    let sent = memory.sent.lock().unwrap();
    let (user, recipients, message) = &sent[0];
    assert_eq!(user, "ann@example.org");
    assert_eq!(
        recipients,
        &["x@example.net".to_string(), "cy@example.net".to_string()]
    );
    let parsed = mail_parser::MessageParser::default()
        .parse(message)
        .unwrap();
    assert_eq!(parsed.subject(), Some("Re: Hello 1  Bcc: evil@example.net"));
    assert!(parsed.header("Bcc").is_none(), "no header injection");
    assert_eq!(parsed.in_reply_to().as_text(), Some("1@test"));
    assert_eq!(parsed.attachment(0).unwrap().contents(), b"file body");
    assert!(parsed.body_text(0).unwrap().contains("Thanks!"));
}

#[test]
fn dates_sizes_and_names() {
    assert_eq!(when(0), "1970-01-01 00:00");
    assert_eq!(when(1_764_079_200), "2025-11-25 14:00");
    assert_eq!(size(10), "10 B");
    assert_eq!(size(2048), "2 KiB");
    assert_eq!(
        folder_link("Sent Items/ä"),
        "/mail?folder=Sent%20Items%2F%C3%A4"
    );
    assert_eq!(
        content_disposition("ä \"b\".pdf"),
        "attachment; filename=\"___b_.pdf\"; filename*=UTF-8''%C3%A4%20%22b%22.pdf"
    );
}

#[tokio::test]
async fn the_account_page_shows_failed_logins() {
    let mut ann = Browser::new(mailbox());
    ann.log_in("ann@example.org").await;
    let page = ann.send("GET", "/account", None).await.body;
    assert!(
        page.contains("203.0.113.7") && page.contains("wrong password"),
        "{page}"
    );
}

/// A list page names its folder's version; a stream opened with an older one says `changed`
/// at once (mail that came between the page and the stream is not missed), a current one
/// waits for the next change.
#[tokio::test]
async fn events_catch_up_with_a_page_built_before_a_change() {
    use futures_util::StreamExt as _;
    let memory = mailbox();
    let mut b = Browser::new(memory.clone());
    b.log_in("ann@example.org").await;
    let list = b.send("GET", "/mail", None).await.body;
    assert!(
        list.contains(r#"data-live="list" data-folder="INBOX" data-since="7""#),
        "{list}"
    );
    let open = |since: u64| {
        let request = Request::builder()
            .uri(format!("/events?folder=INBOX&since={since}"))
            .header(
                header::COOKIE,
                format!("{COOKIE}={}", b.cookie.clone().unwrap()),
            )
            .body(Body::empty())
            .unwrap();
        b.router.clone().oneshot(request)
    };
    let mut stale = open(6).await.unwrap().into_body().into_data_stream();
    let chunk = tokio::time::timeout(Duration::from_secs(5), stale.next())
        .await
        .expect("an event at once")
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&chunk).contains("event: changed"));
    let mut current = open(7).await.unwrap().into_body().into_data_stream();
    assert!(
        tokio::time::timeout(Duration::from_millis(300), current.next())
            .await
            .is_err(),
        "nothing to say yet"
    );
    memory.changed.send_modify(|n| *n += 1);
    let chunk = tokio::time::timeout(Duration::from_secs(5), current.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&chunk).contains("event: changed"));
}

#[tokio::test]
async fn a_deleted_users_session_ends_at_its_next_request() {
    let memory = mailbox();
    let mut ann = Browser::new(memory.clone());
    ann.log_in("ann@example.org").await;
    assert_eq!(ann.send("GET", "/mail", None).await.status, StatusCode::OK);
    memory.gone.lock().unwrap().push("ann@example.org".into());
    let a = ann.send("GET", "/mail", None).await;
    assert_eq!(a.status, StatusCode::SEE_OTHER);
    assert_eq!(a.headers[header::LOCATION], "/login");
    // Ended, not only refused: the user coming back does not revive it.
    memory.gone.lock().unwrap().clear();
    assert_eq!(
        ann.send("GET", "/mail", None).await.status,
        StatusCode::SEE_OTHER
    );
}

mod admin;
mod rules;
