//! The Rules pages: the user's mail rules and out-of-office reply edited with a form and kept
//! as the Sieve script `mailstow-rules` (`rules.rs` writes and reads it back), a script
//! written by hand shown read-only and edited as text, and the list of the user's scripts
//! (activate, deactivate, delete).
//!
//! Every change loads the stored script again, applies the change and stores the whole script
//! (made active); a change is refused while the active script is not one the form wrote.

use std::net::SocketAddr;
use std::sync::Arc;

use askama::Template;
use axum::extract::{ConnectInfo, Form, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use crate::app::{App, backend_problem, blocking, problem, render_page, size};
use crate::backend::{Backend, BackendError, FolderInfo, ScriptError, ScriptInfo};
use crate::rules::{
    ACTIONS_MAX, CONDITIONS_MAX, RULES_MAX, RULES_SCRIPT, RuleForm, Rules, RulesError,
    VacationForm, describe,
};
use crate::sessions::Session;

/// A script name the text editor takes, in bytes (the directory's bound).
const SCRIPT_NAME_BYTES_MAX: usize = 256;

/// An option of a `<select>`.
pub(crate) struct Opt {
    value: &'static str,
    label: &'static str,
    selected: bool,
}

fn options(choices: &[(&'static str, &'static str)], current: &str) -> Vec<Opt> {
    choices
        .iter()
        .map(|&(value, label)| Opt {
            value,
            label,
            selected: value == current,
        })
        .collect()
}

const FIELDS: [(&str, &str); 5] = [
    ("from", "From"),
    ("to", "To or Cc"),
    ("subject", "Subject"),
    ("header", "Header field named"),
    ("size", "Size"),
];
const OPS: [(&str, &str); 7] = [
    ("contains", "contains"),
    ("not_contains", "does not contain"),
    ("is", "is"),
    ("matches", "matches (* and ?)"),
    ("regex", "matches the regular expression"),
    ("over", "is over (KB)"),
    ("under", "is under (KB)"),
];
const KINDS: [(&str, &str); 9] = [
    ("", "(no action)"),
    ("move", "Move to folder"),
    ("copy", "Copy to folder"),
    ("read", "Mark as read"),
    ("flag", "Flag"),
    ("keyword", "Add keyword"),
    ("forward", "Forward to"),
    ("discard", "Discard"),
    ("reject", "Reject with reason"),
];

/// What the rules stored are, for the pages.
enum Editable {
    /// The form's rules (none yet: empty).
    Form(Rules),
    /// A script the form did not write, or edited by hand: shown as it is.
    ReadOnly { name: String, source: String },
}

struct Loaded {
    scripts: Vec<ScriptInfo>,
    editable: Editable,
}

/// The user's scripts, and the rules the form edits: those of `mailstow-rules` when it is
/// the active script or none is active, read back only when it is exactly what the form
/// writes.
async fn load<B: Backend>(app: &Arc<App<B>>, user: &str) -> Result<Loaded, BackendError> {
    let scripts = app.backend.sieve_scripts(user).await?;
    let active = scripts.iter().find(|s| s.active).map(|s| s.name.clone());
    let editable = match active {
        Some(name) if name != RULES_SCRIPT => {
            let source = app.backend.sieve_script(user, &name).await?;
            Editable::ReadOnly { name, source }
        }
        _ if scripts.iter().any(|s| s.name == RULES_SCRIPT) => {
            let source = app.backend.sieve_script(user, RULES_SCRIPT).await?;
            match Rules::from_script(&source, app.config.script_bytes_max) {
                Some(rules) => Editable::Form(rules),
                None => Editable::ReadOnly {
                    name: RULES_SCRIPT.to_string(),
                    source,
                },
            }
        }
        _ => Editable::Form(Rules::default()),
    };
    Ok(Loaded { scripts, editable })
}

/// Why a change was not stored.
enum Refusal {
    /// The page again, with this sentence (`400`).
    Problem(String),
    Backend(BackendError),
}

impl From<RulesError> for Refusal {
    fn from(e: RulesError) -> Refusal {
        Refusal::Problem(e.0)
    }
}

/// The text for a refused script.
fn script_problem(e: ScriptError) -> Refusal {
    match e {
        ScriptError::Invalid {
            line,
            column,
            message,
        } => Refusal::Problem(format!("Line {line}, column {column}: {message}")),
        ScriptError::Refused(why) => Refusal::Problem(why),
        ScriptError::Backend(e) => Refusal::Backend(e),
    }
}

/// Writes the rules' script and stores it as the active one.
async fn store<B: Backend>(app: &Arc<App<B>>, user: &str, rules: &Rules) -> Result<(), Refusal> {
    let script = rules.script()?;
    let max = app.config.script_bytes_max;
    if script.len() > max {
        return Err(Refusal::Problem(format!(
            "These rules make a script of {} bytes, more than the {max} bytes a script may \
             have: shorten or remove some.",
            script.len()
        )));
    }
    app.backend
        .sieve_save(user, RULES_SCRIPT, &script, true)
        .await
        .map_err(|e| match script_problem(e) {
            Refusal::Problem(why) => {
                Refusal::Problem(format!("The rules could not be stored: {why}"))
            }
            other => other,
        })
}

async fn folders<B: Backend>(app: &Arc<App<B>>, user: &str) -> Vec<FolderInfo> {
    let u = user.to_string();
    // The rules live in the directory: the pages work while the mailbox cannot be reached.
    blocking(app, move |b| b.folders(&u))
        .await
        .unwrap_or_default()
}

/// The first value of `key` in a posted form.
fn field<'a>(fields: &'a [(String, String)], key: &str) -> &'a str {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map_or("", |(_, v)| v.as_str())
}

/// The answers to a finished change: back to the list, saying what was done.
fn done(what: &str) -> Response {
    Redirect::to(&format!("/rules?done={what}")).into_response()
}

fn notice(done: &str) -> Option<String> {
    Some(
        match done {
            "saved" => "The rule was saved; your rules are active.",
            "deleted" => "The rule was deleted.",
            "moved" => "The rules were reordered.",
            "vacation" => "The out-of-office reply was saved; your rules are active.",
            "script" => "The script was saved.",
            "activated" => "The script is now active.",
            "deactivated" => "No script is active now: mail is kept in the INBOX.",
            "removed" => "The script was deleted.",
            _ => return None,
        }
        .to_string(),
    )
}

// --- The list ----------------------------------------------------------------------------------

struct RuleRow {
    index: usize,
    number: usize,
    name: String,
    summary: String,
    first: bool,
    last: bool,
}

struct ScriptRow {
    name: String,
    active: bool,
    size: String,
}

#[derive(Template)]
#[template(path = "rules.html")]
struct RulesPage {
    user: String,
    csrf: String,
    folders: Vec<FolderInfo>,
    folder: String,
    notice: Option<String>,
    problem: Option<String>,
    /// The script shown read-only: (name, source).
    readonly: Option<(String, String)>,
    rules: Vec<RuleRow>,
    can_add: bool,
    rules_max: usize,
    vacation: VacationForm,
    scripts: Vec<ScriptRow>,
    rules_script: &'static str,
}

async fn rules_page<B: Backend>(
    app: &Arc<App<B>>,
    session: Session,
    notice: Option<String>,
    problem: Option<(String, StatusCode)>,
    vacation_posted: Option<VacationForm>,
) -> Response {
    let loaded = match load(app, &session.user).await {
        Ok(l) => l,
        Err(e) => return backend_problem(e),
    };
    let folders = folders(app, &session.user).await;
    let (readonly, rules) = match loaded.editable {
        Editable::Form(rules) => (None, rules),
        Editable::ReadOnly { name, source } => (Some((name, source)), Rules::default()),
    };
    let count = rules.rules.len();
    let (problem, status) = match problem {
        Some((p, s)) => (Some(p), s),
        None => (None, StatusCode::OK),
    };
    let mut r = render_page(&RulesPage {
        user: session.user,
        csrf: session.csrf,
        folders,
        folder: String::new(),
        notice,
        problem,
        readonly,
        can_add: count < RULES_MAX,
        rules_max: RULES_MAX,
        rules: rules
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| RuleRow {
                index: i,
                number: i + 1,
                name: r.name.clone(),
                summary: describe(r),
                first: i == 0,
                last: i + 1 == count,
            })
            .collect(),
        vacation: vacation_posted.unwrap_or_else(|| VacationForm::of(&rules.vacation)),
        scripts: loaded
            .scripts
            .into_iter()
            .map(|s| ScriptRow {
                name: s.name,
                active: s.active,
                size: size(s.bytes as u64),
            })
            .collect(),
        rules_script: RULES_SCRIPT,
    });
    *r.status_mut() = status;
    r
}

#[derive(Deserialize)]
pub(crate) struct ListQuery {
    #[serde(default)]
    done: String,
}

pub(crate) async fn list<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Response {
    match app.session(&headers, peer.ip()) {
        Ok((_, session)) => rules_page(&app, session, notice(&q.done), None, None).await,
        Err(denied) => denied.into_response(),
    }
}

/// Loads the form's rules for a change; `Err`: the answer (a hand-written script is active,
/// or the directory failed).
async fn editable<B: Backend>(app: &Arc<App<B>>, user: &str) -> Result<Rules, Response> {
    match load(app, user).await {
        Ok(Loaded {
            editable: Editable::Form(rules),
            ..
        }) => Ok(rules),
        Ok(Loaded {
            editable: Editable::ReadOnly { name, .. },
            ..
        }) => Err(problem(
            StatusCode::CONFLICT,
            "Written by hand",
            &format!(
                "Your rules are the script \u{201c}{name}\u{201d}, which the form cannot edit: \
                 edit it as text on the Rules page."
            ),
        )),
        Err(e) => Err(backend_problem(e)),
    }
}

fn refused(r: Refusal, again: impl FnOnce(String) -> Response) -> Response {
    match r {
        Refusal::Problem(why) => again(why),
        Refusal::Backend(e) => backend_problem(e),
    }
}

/// The rule at `index` of the posted form.
fn index_of(fields: &[(String, String)], count: usize) -> Option<usize> {
    field(fields, "index")
        .parse::<usize>()
        .ok()
        .filter(|&i| i < count)
}

pub(crate) async fn reorder<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    let (_, session) = match app.form_session(&headers, peer.ip(), field(&fields, "csrf")) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let mut rules = match editable(&app, &session.user).await {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    let Some(i) = index_of(&fields, rules.rules.len()) else {
        return problem(StatusCode::NOT_FOUND, "Not found", "No such rule.");
    };
    let other = match field(&fields, "dir") {
        "up" if i > 0 => i - 1,
        "down" if i + 1 < rules.rules.len() => i + 1,
        _ => return done("moved"),
    };
    rules.rules.swap(i, other);
    match store(&app, &session.user, &rules).await {
        Ok(()) => done("moved"),
        Err(r) => refused(r, |why| problem(StatusCode::BAD_REQUEST, "Refused", &why)),
    }
}

pub(crate) async fn delete<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    let (_, session) = match app.form_session(&headers, peer.ip(), field(&fields, "csrf")) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let mut rules = match editable(&app, &session.user).await {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    let Some(i) = index_of(&fields, rules.rules.len()) else {
        return problem(StatusCode::NOT_FOUND, "Not found", "No such rule.");
    };
    rules.rules.remove(i);
    match store(&app, &session.user, &rules).await {
        Ok(()) => done("deleted"),
        Err(r) => refused(r, |why| problem(StatusCode::BAD_REQUEST, "Refused", &why)),
    }
}

pub(crate) async fn vacation<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    let (_, session) = match app.form_session(&headers, peer.ip(), field(&fields, "csrf")) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let mut rules = match editable(&app, &session.user).await {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    let posted = match VacationForm::parse(&fields) {
        Ok(f) => f,
        Err(e) => {
            return rules_page(
                &app,
                session,
                None,
                Some((e.0, StatusCode::BAD_REQUEST)),
                None,
            )
            .await;
        }
    };
    let outcome = match posted.vacation() {
        Ok(v) => {
            rules.vacation = v;
            store(&app, &session.user, &rules).await
        }
        Err(e) => Err(e.into()),
    };
    match outcome {
        Ok(()) => done("vacation"),
        Err(Refusal::Problem(why)) => {
            rules_page(
                &app,
                session,
                None,
                Some((why, StatusCode::BAD_REQUEST)),
                Some(posted),
            )
            .await
        }
        Err(Refusal::Backend(e)) => backend_problem(e),
    }
}

// --- One rule ----------------------------------------------------------------------------------

struct ConditionView {
    n: usize,
    fields: Vec<Opt>,
    header: String,
    ops: Vec<Opt>,
    value: String,
}

struct ActionView {
    n: usize,
    kinds: Vec<Opt>,
    arg: String,
    create: bool,
    keep: bool,
}

#[derive(Template)]
#[template(path = "rule.html")]
struct RulePage {
    user: String,
    csrf: String,
    folders: Vec<FolderInfo>,
    folder: String,
    /// `new`, or the rule's index.
    index: String,
    number: usize,
    name: String,
    any: bool,
    stop: bool,
    conditions: Vec<ConditionView>,
    actions: Vec<ActionView>,
    problem: Option<String>,
    conditions_max: usize,
    actions_max: usize,
}

async fn rule_page<B: Backend>(
    app: &Arc<App<B>>,
    session: Session,
    index: Option<usize>,
    number: usize,
    form: RuleForm,
    problem: Option<String>,
) -> Response {
    let folders = folders(app, &session.user).await;
    // Empty rows to fill in: two more conditions and one more action than the rule has, at
    // least three and two, within the bounds.
    let mut rows = form.conditions;
    if rows.len() < CONDITIONS_MAX {
        let more = (rows.len() + 2).clamp(3, CONDITIONS_MAX) - rows.len();
        rows.extend(std::iter::repeat_n(Default::default(), more));
    }
    let mut acts = form.actions;
    if acts.len() < ACTIONS_MAX {
        let more = (acts.len() + 1).clamp(2, ACTIONS_MAX) - acts.len();
        acts.extend(std::iter::repeat_n(
            crate::rules::ActionRow {
                create: true,
                ..Default::default()
            },
            more,
        ));
    }
    let status = if problem.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let mut r = render_page(&RulePage {
        user: session.user,
        csrf: session.csrf,
        folders,
        folder: String::new(),
        index: index.map_or("new".to_string(), |i| i.to_string()),
        number,
        name: form.name,
        any: form.any,
        stop: form.stop,
        conditions: rows
            .into_iter()
            .enumerate()
            .map(|(n, c)| ConditionView {
                n,
                fields: options(
                    &FIELDS,
                    if c.field.is_empty() {
                        "subject"
                    } else {
                        &c.field
                    },
                ),
                header: c.header,
                ops: options(&OPS, if c.op.is_empty() { "contains" } else { &c.op }),
                value: c.value,
            })
            .collect(),
        actions: acts
            .into_iter()
            .enumerate()
            .map(|(n, a)| ActionView {
                n,
                kinds: options(&KINDS, &a.kind),
                arg: a.arg,
                create: a.create,
                keep: a.keep,
            })
            .collect(),
        problem,
        conditions_max: CONDITIONS_MAX,
        actions_max: ACTIONS_MAX,
    });
    *r.status_mut() = status;
    r
}

#[derive(Deserialize)]
pub(crate) struct RuleQuery {
    index: Option<usize>,
}

pub(crate) async fn rule_form<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<RuleQuery>,
) -> Response {
    let (_, session) = match app.session(&headers, peer.ip()) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let rules = match editable(&app, &session.user).await {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    match q.index {
        Some(i) => match rules.rules.get(i) {
            Some(rule) => rule_page(&app, session, Some(i), i + 1, RuleForm::of(rule), None).await,
            None => problem(StatusCode::NOT_FOUND, "Not found", "No such rule."),
        },
        None if rules.rules.len() >= RULES_MAX => problem(
            StatusCode::BAD_REQUEST,
            "Refused",
            &format!("You have {RULES_MAX} rules, the most that can be kept: delete one first."),
        ),
        None => {
            let number = rules.rules.len() + 1;
            rule_page(&app, session, None, number, RuleForm::default(), None).await
        }
    }
}

pub(crate) async fn rule_save<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    let (_, session) = match app.form_session(&headers, peer.ip(), field(&fields, "csrf")) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let mut rules = match editable(&app, &session.user).await {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    let index = match field(&fields, "index") {
        "new" => None,
        _ => match index_of(&fields, rules.rules.len()) {
            Some(i) => Some(i),
            None => return problem(StatusCode::NOT_FOUND, "Not found", "No such rule."),
        },
    };
    let number = index.map_or(rules.rules.len() + 1, |i| i + 1);
    let form = match RuleForm::parse(&fields) {
        Ok(f) => f,
        Err(e) => return problem(StatusCode::BAD_REQUEST, "Refused", &e.0),
    };
    let outcome = match form.rule(number) {
        Ok(rule) => {
            match index {
                Some(i) => rules.rules[i] = rule,
                None => rules.rules.push(rule),
            }
            store(&app, &session.user, &rules).await
        }
        Err(e) => Err(e.into()),
    };
    match outcome {
        Ok(()) => done("saved"),
        Err(Refusal::Problem(why)) => {
            rule_page(&app, session, index, number, form, Some(why)).await
        }
        Err(Refusal::Backend(e)) => backend_problem(e),
    }
}

// --- Scripts as text ---------------------------------------------------------------------------

#[derive(Template)]
#[template(path = "script.html")]
struct ScriptPage {
    user: String,
    csrf: String,
    folders: Vec<FolderInfo>,
    folder: String,
    /// Empty: a new script, named in the form.
    name: String,
    is_new: bool,
    source: String,
    activate: bool,
    problem: Option<String>,
    rules_script: &'static str,
}

#[allow(clippy::too_many_arguments)]
async fn script_page<B: Backend>(
    app: &Arc<App<B>>,
    session: Session,
    name: String,
    is_new: bool,
    source: String,
    activate: bool,
    problem: Option<String>,
) -> Response {
    let folders = folders(app, &session.user).await;
    let status = if problem.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let mut r = render_page(&ScriptPage {
        user: session.user,
        csrf: session.csrf,
        folders,
        folder: String::new(),
        name,
        is_new,
        source,
        activate,
        problem,
        rules_script: RULES_SCRIPT,
    });
    *r.status_mut() = status;
    r
}

#[derive(Deserialize)]
pub(crate) struct ScriptQuery {
    name: Option<String>,
}

pub(crate) async fn script_form<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<ScriptQuery>,
) -> Response {
    let (_, session) = match app.session(&headers, peer.ip()) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let Some(name) = q.name.filter(|n| !n.is_empty()) else {
        return script_page(
            &app,
            session,
            String::new(),
            true,
            String::new(),
            true,
            None,
        )
        .await;
    };
    let scripts = match app.backend.sieve_scripts(&session.user).await {
        Ok(s) => s,
        Err(e) => return backend_problem(e),
    };
    let Some(info) = scripts.into_iter().find(|s| s.name == name) else {
        return backend_problem(BackendError::NotFound);
    };
    match app.backend.sieve_script(&session.user, &name).await {
        Ok(source) => script_page(&app, session, name, false, source, info.active, None).await,
        Err(e) => backend_problem(e),
    }
}

#[derive(Deserialize)]
pub(crate) struct ScriptForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    /// The page named a new script.
    #[serde(default)]
    new: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    activate: String,
}

pub(crate) async fn script_save<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<ScriptForm>,
) -> Response {
    let (_, session) = match app.form_session(&headers, peer.ip(), &form.csrf) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let name = form.name.trim().to_string();
    let is_new = !form.new.is_empty();
    let activate = !form.activate.is_empty();
    let max = app.config.script_bytes_max;
    let checked = if name.is_empty() {
        Err("Name the script.".to_string())
    } else if name.len() > SCRIPT_NAME_BYTES_MAX || name.chars().any(char::is_control) {
        Err(format!(
            "A script name is at most {SCRIPT_NAME_BYTES_MAX} bytes, without control characters."
        ))
    } else if form.source.len() > max {
        Err(format!(
            "The script is {} bytes, more than the {max} bytes a script may have.",
            form.source.len()
        ))
    } else {
        Ok(())
    };
    // A new script does not silently replace one of the same name.
    let checked = match checked {
        Ok(()) if is_new => match app.backend.sieve_scripts(&session.user).await {
            Ok(scripts) if scripts.iter().any(|s| s.name == name) => Err(format!(
                "A script named \u{201c}{name}\u{201d} exists already: edit it from the list, \
                 or choose another name."
            )),
            Ok(_) => Ok(()),
            Err(e) => return backend_problem(e),
        },
        other => other,
    };
    let outcome = match checked {
        Ok(()) => app
            .backend
            .sieve_save(&session.user, &name, &form.source, activate)
            .await
            .map_err(script_problem),
        Err(why) => Err(Refusal::Problem(why)),
    };
    match outcome {
        Ok(()) => done("script"),
        Err(Refusal::Problem(why)) => {
            script_page(
                &app,
                session,
                name,
                is_new,
                form.source,
                activate,
                Some(why),
            )
            .await
        }
        Err(Refusal::Backend(e)) => backend_problem(e),
    }
}

#[derive(Deserialize)]
pub(crate) struct NameForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
}

/// Activates the named script, or none when the name is empty.
pub(crate) async fn activate<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<NameForm>,
) -> Response {
    let (_, session) = match app.form_session(&headers, peer.ip(), &form.csrf) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let name = (!form.name.is_empty()).then_some(form.name.as_str());
    match app.backend.sieve_activate(&session.user, name).await {
        Ok(()) => done(if name.is_some() {
            "activated"
        } else {
            "deactivated"
        }),
        Err(e) => refused(script_problem(e), |why| {
            problem(StatusCode::BAD_REQUEST, "Refused", &why)
        }),
    }
}

pub(crate) async fn remove<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<NameForm>,
) -> Response {
    let (_, session) = match app.form_session(&headers, peer.ip(), &form.csrf) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    match app.backend.sieve_delete(&session.user, &form.name).await {
        Ok(()) => done("removed"),
        Err(e) => refused(script_problem(e), |why| {
            problem(StatusCode::BAD_REQUEST, "Refused", &why)
        }),
    }
}
